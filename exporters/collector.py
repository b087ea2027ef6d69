"""The exporter's collector: snapshot families built once per snapshot, health series on every scrape.

It decides what a scrape serves when the file is new, missing or broken (the last good document), and
keeps the rendered exposition so scrapes do not pay for a snapshot that has not changed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric

from exporters.families import Families, fill, num
from exporters.source import SnapshotSource, SnapshotState


@dataclass(frozen=True)
class _Prepared:
    """One rendering of the snapshot, ready to serve."""

    key: object  # the file identity it was rendered from
    healthy: bool  # the file parsed and rendered
    errors: int
    doc: dict | None  # the document served (the last good one when the file is not)
    body: bytes


class SecscanCollector:
    """A prometheus-client collector over a SnapshotSource.

    `critical_info_limit` > 0 turns on the opt-in `secscan_critical_issue_info` series (at most that many).
    """

    def __init__(self, source: SnapshotSource, *, critical_info_limit: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.critical_info_limit = max(0, critical_info_limit)
        self.clock = clock
        self._good: tuple[dict, Families] | None = None  # last document that rendered, with its families
        self._bad_doc: dict | None = None
        self._render_errors = 0
        self._body: tuple[Families, bytes] | None = None  # text exposition of self._good's families
        self._ready: _Prepared | None = None  # what HTTP scrapes serve (see exposition)
        self._refreshing = False
        self._lock = threading.Lock()  # concurrent scrapes share the bookkeeping above

    def describe(self) -> Iterable[Metric]:
        return []  # families depend on the snapshot; nothing to pre-declare

    def collect(self) -> Iterator[Metric]:
        """prometheus-client's path (generate_latest): everything evaluated now, synchronously."""
        _state, data, doc, healthy, errors = self._snapshot()
        yield from self._head(healthy, errors, doc).items.values()
        if data is not None:
            yield from data.items.values()

    def exposition(self, *, wait: bool = False) -> bytes:
        """The scrape body served over HTTP: health series rendered now, snapshot series pre-rendered.

        A scrape never waits for a new snapshot to be parsed and rendered: the one that notices the file
        changed starts that work in the background and serves the previous rendering, which the next
        scrape replaces (data a few milliseconds old, on a file rewritten every sync). Only the very first
        scrape, with nothing rendered yet, renders inline. `wait=True` always renders the file as it is.
        """
        if wait:
            ready = self._prepare()
        else:
            key = self.source.peek()
            with self._lock:
                ready = self._ready
                start = ready is not None and ready.key != key and not self._refreshing
                if start:
                    self._refreshing = True
            if ready is None:
                ready = self._prepare()
            elif start:
                threading.Thread(target=self._refresh, name="scanwatch-snapshot-render", daemon=True).start()
        from exporters.render import render

        return render(self._head(ready.healthy, ready.errors, ready.doc).items.values()) + ready.body

    def _refresh(self) -> None:
        try:
            self._prepare()
        except Exception:  # never leave scrapes without a refresh: the next change retries
            pass
        finally:
            with self._lock:
                self._refreshing = False

    def _prepare(self) -> _Prepared:
        from exporters.render import render

        state, data, doc, healthy, errors = self._snapshot()
        body = b""
        if data is not None:
            with self._lock:
                cached = self._body
            if cached is None or cached[0] is not data:
                cached = (data, render(data.items.values()))
                with self._lock:
                    self._body = cached
            body = cached[1]
        prepared = _Prepared(state.key, healthy, errors, doc, body)
        with self._lock:
            self._ready = prepared
        return prepared

    def _snapshot(self) -> tuple[SnapshotState, Families | None, dict | None, bool, int]:
        """The state of the file, the families to serve (built once per document) and their document.

        A document that parses but does not render (a mismatched writer) counts as unreadable and the
        last good one keeps being served, so a scrape never fails.
        """
        state = self.source.get()
        doc, data, malformed = state.doc, None, False
        with self._lock:
            good = self._good
        if doc is not None:
            if good is not None and good[0] is doc:
                data = good[1]
            else:
                data = self._render(doc)
                with self._lock:
                    if data is None:
                        malformed = True
                        if doc is not self._bad_doc:
                            self._bad_doc = doc
                            self._render_errors += 1
                    else:
                        self._good = good = (doc, data)
                if data is None and good is not None:
                    doc, data = good
        with self._lock:
            errors = state.load_errors + self._render_errors
        return state, data, doc if data is not None else None, state.readable and not malformed, errors

    def _head(self, healthy: bool, errors: int, doc: dict | None) -> Families:
        head = Families()
        head.gauge("secscan_snapshot_readable", "1 when the current snapshot file could be read and parsed, 0 "
                   "when the exporter is serving the last good copy (or nothing).", [], [], 1 if healthy else 0)
        head.counter("secscan_snapshot_load_errors", "Snapshot files that could not be loaded since the exporter "
                     "started.", [], [], errors)
        generated = num(doc.get("generated_at_seconds")) if doc is not None else None
        if generated is not None:
            head.gauge("secscan_snapshot_generated_timestamp_seconds", "When the pipeline built the snapshot being "
                       "served.", [], [], generated)
            head.gauge("secscan_snapshot_age_seconds", "Seconds since the pipeline built the snapshot being "
                       "served.", [], [], self.clock() - generated)
        return head

    def _render(self, doc: dict) -> Families | None:
        f = Families()
        try:
            fill(f, doc, self.critical_info_limit)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return f
