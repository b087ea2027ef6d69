"""/metrics bodies: prometheus-client's encoders, with each workspace's part encoded once per part.

A part changes once its workspace's run; scrapes come every few seconds. Encoding the large world's ~23k
samples costs the library about 80-150 ms, so the common unfiltered scrape serves the library encoder's
output for the snapshot's families cached per (state of the store, format), followed by the health and
process series encoded now. That output is assembled from each part's families encoded alone and cached
per (part, format): a new part costs the encoding of that part only, and each family still appears once,
its header from the first part that has it and its samples from all. Both text formats allow families in
any order; OpenMetrics' `# EOF` trailer is taken off the cached part so the live part ends the body. Gzip
keeps the compressor's state after the cached part and finishes a copy of it per scrape: one gzip member,
compressed once.

A scrape never waits for a new snapshot: a watch thread looks at the store's identity every WATCH_SECONDS
(a listing of the folder, or the generations the database poll last saw: no read) and, when it moved,
builds the new state in the background with every format served so far, so that the first scrape after a
part is written serves it once it is built; a scrape that comes sooner (and notices the change itself)
serves the previous one. Filtered scrapes (`name[]`) go to the library unchanged.

Nothing that fails here is silent: a build that raises is logged once per store state (and tried again on
the next change), and `problem()` tells the probes when the watch or the store's own poll has stopped.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from exporters.collector import SecscanCollector, SnapshotView
from exporters.families import Families

Encoder = Callable[[Collector], bytes]
MAX_FORMATS = 8  # cached encodings per snapshot; Accept headers can name many versions
WATCH_SECONDS = 1.0  # how often the watch looks for a changed part (a listing, no read)

log = logging.getLogger("scanwatch.exporter")


class _Fixed(Collector):
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
    compressor: zlib._Compress | None = None  # typeshed's name for what zlib.compressobj returns


@dataclass
class _Ready:
    view: SnapshotView
    parts: dict[tuple[str, bool], _Part] = field(default_factory=dict)


Blocks = dict[str, tuple[bytes, bytes]]  # family name -> (its header lines, its samples), in one format


def _encode(encoder: Encoder, families: Iterable[Metric]) -> bytes:
    data, trailer = encoder(_Fixed(families)), encoder(_Fixed(()))
    return data[: -len(trailer)] if trailer and data.endswith(trailer) else data


def _blocks(families: Families, encoder: Encoder) -> Blocks:
    """Each family encoded alone, cut into its `#` header and its samples."""
    out: Blocks = {}
    for name, fam in families.items.items():
        data = _encode(encoder, [fam])
        cut = 0
        while data.startswith(b"#", cut):
            cut = data.index(b"\n", cut) + 1
        out[name] = (data[:cut], data[cut:])
    return out


class Exposition:
    """What /metrics answers: the library's registry for filtered scrapes, a per-snapshot cache otherwise."""

    def __init__(self, collector: SecscanCollector) -> None:
        self.collector = collector
        self.process = ProcessCollector(registry=None)
        self._ready: _Ready | None = None
        self._refreshing = False
        self._lock = threading.Lock()
        self._encoded: dict[tuple[str, str], tuple[Families, Blocks]] = {}  # (part, format): its encoding
        self._watch: threading.Thread | None = None
        self._stop = threading.Event()
        self._failed: object = None  # the store state whose build last raised (said once)

    def watch(self, every: float = WATCH_SECONDS) -> None:
        """Build each new state of the store as soon as it is seen, not when a scrape first asks."""
        def loop() -> None:
            said = None
            while not self._stop.wait(every):
                try:
                    self._current()
                except Exception as exc:  # said once per distinct failure, tried again every time
                    if repr(exc) != said:
                        said = repr(exc)
                        log.exception("the exporter's watch for new snapshot parts failed; trying again")

        self._watch = threading.Thread(target=loop, name="scanwatch-snapshot-watch", daemon=True)
        self._watch.start()

    def close(self) -> None:
        self._stop.set()

    def problem(self) -> str | None:
        """Why the exporter cannot say the truth about its parts now, or None (for /-/healthy and /-/ready)."""
        if self._watch is not None and not self._watch.is_alive() and not self._stop.is_set():
            return "the exporter's watch for new snapshot parts has stopped"
        store_problem = getattr(self.collector.source.store, "problem", None)
        return store_problem() if callable(store_problem) else None

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

        Asked through the same cache as /metrics, so a probe that sees a new part starts its rendering as a
        scrape would, and answers True once a scrape would carry a workspace's series. Once a part has loaded, a
        later unreadable one keeps its last good copy served, so the pod stays ready; not while the store's
        poll is stopped or stuck (`problem`), when what it serves can no longer be told.
        """
        current = self._current()
        return current is not None and any(p.doc is not None for p in current.view.parts.values()) \
            and self.problem() is None

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
            part = self._encode_part(ready.view, encoder, content_type, gzipped)
            with self._lock:
                if len(ready.parts) < MAX_FORMATS:
                    ready.parts.setdefault((content_type, gzipped), part)
        return part

    def _refresh(self, warm: dict[tuple[str, bool], _Part]) -> None:
        try:
            self._prepare(warm)
        except Exception:  # scrapes keep the previous state; the next change of the store tries again
            key = self.collector.source.peek()
            if key != self._failed:
                self._failed = key
                log.exception("the exporter could not build the new state of the metrics snapshot; serving the "
                              "previous one")
        finally:
            with self._lock:
                self._refreshing = False

    def _prepare(self, warm: dict[tuple[str, bool], _Part]) -> _Ready:
        """A new view with the formats scrapes asked for so far already encoded, then swapped in."""
        view = self.collector.view()
        ready = _Ready(view, {fmt: self._encode_part(view, old.encoder, fmt[0], fmt[1]) for fmt, old in warm.items()})
        with self._lock:
            self._ready = ready
            live = {(name, fmt[0]) for name, _ in view.part_families() for fmt in ready.parts}
            self._encoded = {k: v for k, v in self._encoded.items() if k in live}
        return ready

    def _encode_part(self, view: SnapshotView, encoder: Encoder, content_type: str, gzipped: bool) -> _Part:
        """Every part's families in one format, each family once; a part encoded before is not encoded again."""
        headers: dict[str, bytes] = {}
        samples: dict[str, list[bytes]] = {}
        for name, families in view.part_families():
            with self._lock:
                held = self._encoded.get((name, content_type))
            if held is None or held[0] is not families:
                held = (families, _blocks(families, encoder))
                with self._lock:
                    self._encoded[(name, content_type)] = held
            for family, (header, body) in held[1].items():
                headers.setdefault(family, header)
                samples.setdefault(family, []).append(body)
        data = b"".join(headers[family] + b"".join(samples[family]) for family in headers)
        if not gzipped:
            return _Part(encoder, data)
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip member, as gzip.compress writes
        return _Part(encoder, compressor.compress(data), compressor)
