"""The exporter's collector: snapshot families built once per snapshot, health series on every scrape.

It decides what a scrape serves when the file is new, missing or broken (the last good document). It is
an ordinary prometheus-client custom collector: the library's encoders, `name[]` filtering and
`generate_latest` all go through `collect()`. It has no `describe()` because its families depend on the
snapshot: a registry with `auto_describe` learns their names from a collection. The HTTP side
(exposition.py) also asks for the view and the health series separately, to cache the encoded snapshot
families per snapshot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric

from exporters.families import Families, fill, num
from exporters.source import SnapshotSource


@dataclass(frozen=True)
class SnapshotView:
    """What a scrape serves for one state of the file."""

    key: object  # identity of the file this view was taken from (see SnapshotSource.peek)
    healthy: bool  # the file parsed and its families built
    errors: int
    doc: dict | None  # the document served (the last good one when the file is not)
    families: Families | None  # its series, built once per document


class SecscanCollector:
    """A prometheus-client collector over a SnapshotSource.

    `critical_info_limit` > 0 turns on the opt-in `secscan_critical_issue_info` series (at most that many).
    """

    def __init__(self, source: SnapshotSource, *, critical_info_limit: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.critical_info_limit = max(0, critical_info_limit)
        self.clock = clock
        self._good: tuple[dict, Families] | None = None  # last document that built, with its families
        self._bad_doc: dict | None = None
        self._build_errors = 0
        self._lock = threading.Lock()  # concurrent scrapes share the bookkeeping above

    def collect(self) -> Iterator[Metric]:
        view = self.view()
        yield from self.health(view)
        if view.families is not None:
            yield from view.families.items.values()

    def view(self) -> SnapshotView:
        """The file's state now and the families to serve for it.

        A document that parses but does not build (a mismatched writer) counts as unreadable and the last
        good one keeps being served, so a scrape never fails.
        """
        key = self.source.peek()
        state = self.source.get()
        doc, data, malformed = state.doc, None, False
        with self._lock:
            good = self._good
        if doc is not None:
            if good is not None and good[0] is doc:
                data = good[1]
            else:
                data = self._build(doc)
                with self._lock:
                    if data is None:
                        malformed = True
                        if doc is not self._bad_doc:
                            self._bad_doc = doc
                            self._build_errors += 1
                    else:
                        self._good = good = (doc, data)
                if data is None and good is not None:
                    doc, data = good
        with self._lock:
            errors = state.load_errors + self._build_errors
        return SnapshotView(key, state.readable and not malformed, errors, doc if data is not None else None, data)

    def health(self, view: SnapshotView) -> list[Metric]:
        """The series computed on every scrape: readability, load errors, the served snapshot's age."""
        head = Families()
        head.gauge("secscan_snapshot_readable", "1 when the current snapshot file could be read and parsed, 0 "
                   "when the exporter is serving the last good copy (or nothing).", [], [], 1 if view.healthy else 0)
        head.counter("secscan_snapshot_load_errors", "Snapshot files that could not be loaded since the exporter "
                     "started.", [], [], view.errors)
        generated = num(view.doc.get("generated_at_seconds")) if view.doc is not None else None
        if generated is not None:
            head.gauge("secscan_snapshot_generated_timestamp_seconds", "When the pipeline built the snapshot being "
                       "served.", [], [], generated)
            head.gauge("secscan_snapshot_age_seconds", "Seconds since the pipeline built the snapshot being "
                       "served.", [], [], self.clock() - generated)
        return list(head.items.values())

    def _build(self, doc: dict) -> Families | None:
        f = Families()
        try:
            fill(f, doc, self.critical_info_limit)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return f
