"""/metrics bodies: prometheus-client's encoders, with the snapshot's part encoded once per snapshot.

The snapshot changes once a sync; scrapes come every few seconds. Encoding the large world's ~23k
samples costs the library about 80-150 ms, so the common unfiltered scrape serves the library encoder's
output for the snapshot's families cached per (snapshot, format), followed by the health and process
series encoded now. Both text formats allow families in any order; OpenMetrics' `# EOF` trailer is
taken off the cached part so the live part ends the body. Gzip keeps the compressor's state after the
cached part and finishes a copy of it per scrape: one gzip member, compressed once.

A scrape never waits for a new snapshot: the one that notices the file changed starts building it in
the background (with every format served so far) and serves the previous one, which the next scrape
replaces. Filtered scrapes (`name[]`) go to the library unchanged.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector

from exporters.collector import SecscanCollector, SnapshotView

Encoder = Callable[[object], bytes]
MAX_FORMATS = 8  # cached encodings per snapshot; Accept headers can name many versions


class _Fixed:
    """A collector over families already built (what the library's encoders walk)."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


@dataclass(frozen=True)
class _Part:
    """The snapshot's families in one format: bytes, and for gzip the compressor after them."""

    encoder: Encoder
    data: bytes
    compressor: object | None = None


@dataclass
class _Ready:
    view: SnapshotView
    parts: dict[tuple[str, bool], _Part] = field(default_factory=dict)


def _encode_part(view: SnapshotView, encoder: Encoder, gzipped: bool) -> _Part:
    families = view.families.items.values() if view.families is not None else ()
    data, trailer = encoder(_Fixed(families)), encoder(_Fixed(()))
    if trailer and data.endswith(trailer):
        data = data[: -len(trailer)]
    if not gzipped:
        return _Part(encoder, data)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip member, as gzip.compress writes
    return _Part(encoder, compressor.compress(data), compressor)


class Exposition:
    """What /metrics answers: the library's registry for filtered scrapes, a per-snapshot cache otherwise."""

    def __init__(self, collector: SecscanCollector) -> None:
        self.collector = collector
        self.process = ProcessCollector(registry=None)
        self._ready: _Ready | None = None
        self._refreshing = False
        self._lock = threading.Lock()

    def registry(self) -> CollectorRegistry:
        """The library's view of /metrics, read now: scanwatch's series and the process metrics.

        Built per use because the family names (which `name[]` filtering looks up) depend on the snapshot.
        """
        registry = CollectorRegistry(auto_describe=True)
        registry.register(self.collector)
        registry.register(self.process)
        return registry

    def ready(self) -> bool:
        """Whether unfiltered scrapes now serve a loaded snapshot (the readiness probe).

        Asked through the same cache as /metrics, so a probe that sees a new file starts its rendering as a
        scrape would, and answers True only once a scrape would carry the workspaces' series. Once one has
        loaded, a later unreadable file keeps the last good one served, so the pod stays ready.
        """
        current = self._current()
        return current is not None and current.view.doc is not None

    def body(self, accept: str | None, accept_encoding: str | None, *,
             cached_only: bool = False) -> tuple[str, list[tuple[str, str]], bytes] | None:
        """(status, headers, body) of an unfiltered scrape, as the library's `_bake_output` would answer.

        `cached_only` answers only when the snapshot's part is already encoded in that format (a fraction of
        a millisecond, fit for the event loop), and None when it would have to be encoded first.
        """
        encoder, content_type = choose_encoder(accept or "")
        gzipped = gzip_accepted(accept_encoding or "")
        ready = self._current(cached_only)
        part = None if ready is None else self._part(ready, encoder, content_type, gzipped, cached_only)
        if ready is None or part is None:
            return None
        live = encoder(_Fixed([*self.collector.health(ready.view), *self.process.collect()]))
        headers = [("Content-Type", content_type)]
        if part.compressor is None:
            return "200 OK", headers, part.data + live
        finish = part.compressor.copy()
        headers.append(("Content-Encoding", "gzip"))
        return "200 OK", headers, part.data + finish.compress(live) + finish.flush()

    def _current(self, cached_only: bool = False) -> _Ready | None:
        key = self.collector.source.peek()
        with self._lock:
            ready = self._ready
            start = ready is not None and ready.view.key != key and not self._refreshing
            if start:
                self._refreshing = True
        if ready is None:  # the very first scrape: nothing to serve meanwhile
            return None if cached_only else self._prepare({})
        if start:
            threading.Thread(target=self._refresh, args=(dict(ready.parts),), name="scanwatch-snapshot-render",
                             daemon=True).start()
        return ready

    def _part(self, ready: _Ready, encoder: Encoder, content_type: str, gzipped: bool,
              cached_only: bool) -> _Part | None:
        with self._lock:
            part = ready.parts.get((content_type, gzipped))
        if part is None and not cached_only:
            part = _encode_part(ready.view, encoder, gzipped)
            with self._lock:
                if len(ready.parts) < MAX_FORMATS:
                    ready.parts.setdefault((content_type, gzipped), part)
        return part

    def _refresh(self, warm: dict[tuple[str, bool], _Part]) -> None:
        try:
            self._prepare(warm)
        except Exception:  # never leave scrapes without a refresh: the next change retries
            pass
        finally:
            with self._lock:
                self._refreshing = False

    def _prepare(self, warm: dict[tuple[str, bool], _Part]) -> _Ready:
        """A new view with the formats scrapes asked for so far already encoded, then swapped in."""
        view = self.collector.view()
        ready = _Ready(view, {fmt: _encode_part(view, old.encoder, fmt[1]) for fmt, old in warm.items()})
        with self._lock:
            self._ready = ready
        return ready
