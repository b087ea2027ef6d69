"""The bytes of a plain /metrics scrape: the library's encoders run once per snapshot change, in the background.

A part changes when its workspace's sync writes it, minutes apart; scrapes come every few seconds, and the
library encodes about 12 µs a sample (a thousand small workspaces hold 612,000). So a watch thread looks at
the store's identity every WATCH_SECONDS (a listing, or the generations the database poll last saw: no read)
and, when it moved, takes the new view and encodes its families with prometheus-client's own encoders
(`choose_encoder`: `generate_latest` for the text format, the OpenMetrics one for Prometheus), each format
plain and gzipped (level 9, one gzip member, as the library's `gzip.compress`). Scrapes keep the previous
bytes until the new ones are done; before the first, a scrape waits for them and `/-/ready` is 503.

A plain GET is those bytes followed by what moves between scrapes, encoded now by the same encoder: the
health series (each part's snapshot age follows the clock) and the process's own `process_*`, a few
thousand samples at most. They are not cached with a time to live: a cached age would be wrong by up to that
time, and a short one would re-encode the snapshot about once a scrape. OpenMetrics' `# EOF` is taken off
the cached bytes so the live part ends the body; the gzip state after the cached bytes is copied per scrape
to compress the live part into the same member. Filtered scrapes (`name[]`), other methods and a format not
encoded yet go to the library's app, which collects now; such a format is encoded from the next look on.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector

from exporters.collector import SecscanCollector, SnapshotView, merge

WATCH_SECONDS = 1.0
MAX_FORMATS = 4  # encoded formats; `Accept` headers can name many versions and escapings
PROMETHEUS = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75," \
             "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"  # what Prometheus 2 asks for
log = logging.getLogger("scanwatch.exporter")


class _Fixed:
    """Families already built, as the library's encoders walk a registry."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> list[Metric]:
        return self.families


@dataclass(frozen=True)
class _Body:
    plain: bytes
    gzipped: bytes
    compressor: Any  # the gzip state after `plain`, copied per scrape to finish the member


@dataclass(frozen=True)
class _Encoded:
    view: SnapshotView
    bodies: dict[str, _Body]  # by content type


def _encode(encoder: Callable[[Any], bytes], families: _Fixed) -> _Body:
    data, trailer = encoder(families), encoder(_Fixed(()))
    plain = data[: len(data) - len(trailer)]
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip member, as gzip.compress writes
    return _Body(plain, compressor.compress(plain), compressor)


class EncodedSnapshot:
    """The snapshot's families encoded per format, replaced by a watch thread when the store moves."""

    def __init__(self, collector: SecscanCollector) -> None:
        self.collector = collector
        self.process = ProcessCollector(registry=None)
        self.current: _Encoded | None = None
        self._encoders = {kind: encoder for encoder, kind in map(choose_encoder, ("", PROMETHEUS))}
        self._lock = threading.Lock()
        self._encoded = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="scanwatch-snapshot-encode", daemon=True)

    def start(self, every: float = WATCH_SECONDS) -> EncodedSnapshot:
        self.every = every
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        said = None
        while True:
            try:
                self.refresh()
            except Exception as exc:  # scrapes keep the previous bytes; said once per distinct failure
                if repr(exc) != said:
                    said = repr(exc)
                    log.exception("the exporter could not encode the new metrics snapshot; serving the previous one")
            if self._stop.wait(self.every):
                return

    def refresh(self) -> None:
        """Encode the store's state now if it moved, or a format asked for since: the one place that does."""
        current, key = self.current, self.collector.source.peek()
        with self._lock:
            encoders = dict(self._encoders)
        if current is not None and current.view.key == key and encoders.keys() <= current.bodies.keys():
            return
        started = time.process_time()
        moved = current is None or current.view.key != key
        view = self.collector.view() if current is None or moved else current.view
        bodies = {} if current is None or moved else dict(current.bodies)
        families = _Fixed(merge(f for _, f in view.part_families()))
        for kind, encoder in encoders.items():
            bodies[kind] = bodies.get(kind) or _encode(encoder, families)
        self.current = _Encoded(view, bodies)
        self._encoded.set()
        log.debug("encoded %d parts in %d formats: %.2f s of CPU", len(view.parts), len(bodies),
                  time.process_time() - started)

    def answer(self, accept: str | None, accept_encoding: str | None,
               wait: float) -> tuple[str, list[tuple[str, str]], list[bytes]] | None:
        """(status, headers, body) of a plain scrape, as the library's `_bake_output` answers it; None for a
        format not encoded yet (the library's app answers it, and it is encoded from the next look on)."""
        encoder, kind = choose_encoder(accept or "")
        if not self._encoded.wait(wait):
            return "503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8")], \
                [b"the exporter is still encoding its first metrics snapshot\n"]
        current = self.current
        assert current is not None
        body = current.bodies.get(kind)
        if body is None:
            with self._lock:
                if len(self._encoders) < MAX_FORMATS:
                    self._encoders.setdefault(kind, encoder)
            return None
        live = encoder(_Fixed([*self.collector.health(current.view), *self.process.collect()]))
        if not gzip_accepted(accept_encoding or ""):
            return "200 OK", [("Content-Type", kind)], [body.plain, live]
        finish = body.compressor.copy()
        return "200 OK", [("Content-Type", kind), ("Content-Encoding", "gzip")], \
            [body.gzipped, finish.compress(live) + finish.flush()]

    def ready(self) -> bool:
        """The readiness probe: the first encode is done and it serves a loaded snapshot."""
        current = self.current
        return current is not None and self.collector.ready(current.view)

    def problem(self) -> str | None:
        """Why what is served can no longer be trusted (the watch or the store's poll stopped), or None."""
        if self._thread.ident is not None and not self._thread.is_alive() and not self._stop.is_set():
            return "the exporter's watch for new snapshot parts has stopped"
        return self.collector.problem()
