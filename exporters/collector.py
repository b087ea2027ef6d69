"""The exporter's collector: each part's families built once per part, health series on every scrape.

It decides what a scrape serves when a part is new, missing or broken (that part's last good document), per
workspace. It is an ordinary prometheus-client custom collector: the library's encoders, `name[]` filtering
and `generate_latest` all go through `collect()`. It has no `describe()` because its families depend on the
snapshot: a registry with `auto_describe` learns their names from a collection. The HTTP side
(exposition.py) also asks for the view and the health series separately, to cache each part's encoded
families.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import Metric

from exporters.families import Families, fill, num
from exporters.source import SnapshotSource
from pipelines.snapshot.catalogue import BY_NAME
from pipelines.snapshot.store import WHOLE

log = logging.getLogger("scanwatch.exporter")


@dataclass(frozen=True)
class PartView:
    """What a scrape serves of one part."""

    name: str
    workspace: str  # the label of its health series ("" for a single-file snapshot of every workspace)
    healthy: bool  # the stored part parsed and its families built
    doc: dict[str, Any] | None  # the document served (the last good one when the stored part is not)
    families: Families | None  # its series, built once per document


@dataclass(frozen=True)
class SnapshotView:
    """What a scrape serves for one state of the store."""

    key: object  # identity of the store this view was taken from (see SnapshotSource.peek)
    listed: bool  # the store could be listed
    errors: int
    parts: dict[str, PartView] = field(default_factory=dict)
    shared: Families | None = None  # the series served once (the newest part's), never once per workspace

    @property
    def healthy(self) -> bool:
        return self.listed and bool(self.parts) and all(p.healthy for p in self.parts.values())

    def part_families(self) -> Iterator[tuple[str, Families]]:
        if self.shared is not None:
            yield "", self.shared
        for name, part in self.parts.items():
            if part.families is not None:
                yield name, part.families


def merge(families: Iterable[Families]) -> list[Metric]:
    """One family per name, with every part's samples (a text format allows a family once)."""
    by_name: dict[str, list[Metric]] = {}
    for f in families:
        for name, fam in f.items.items():
            by_name.setdefault(name, []).append(fam)
    merged = []
    for fams in by_name.values():
        if len(fams) == 1:
            merged.append(fams[0])
            continue
        whole = Metric(fams[0].name, fams[0].documentation, fams[0].type, fams[0].unit)
        whole.samples = [s for fam in fams for s in fam.samples]
        merged.append(whole)
    return merged


class SecscanCollector:
    """A prometheus-client collector over a SnapshotSource.

    `critical_info_limit` > 0 turns on the opt-in `secscan_critical_issue_info` series (at most that many per
    workspace).
    """

    def __init__(self, source: SnapshotSource, *, critical_info_limit: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.critical_info_limit = max(0, critical_info_limit)
        self.clock = clock
        # per part: the last document that built, and its families
        self._good: dict[str, tuple[dict[str, Any], Families]] = {}
        self._bad: dict[str, dict[str, Any]] = {}
        self._said: dict[tuple[str, str], dict[str, Any]] = {}  # the last document whose failure to build was logged
        self._build_errors = 0
        self._lock = threading.Lock()  # concurrent scrapes share the bookkeeping above

    def collect(self) -> Iterator[Metric]:
        view = self.view()
        yield from self.health(view)
        yield from merge(f for _, f in view.part_families())

    def view(self) -> SnapshotView:
        """The store's state now and the families to serve for each part.

        A part that parses but does not build (a mismatched writer) counts as unreadable and its last good
        document keeps being served, so a scrape never fails.
        """
        key = self.source.peek()
        state = self.source.get()
        parts: dict[str, PartView] = {}
        for name, part in state.parts.items():
            doc, families, healthy = part.doc, None, part.readable
            with self._lock:
                good = self._good.get(name)
            if doc is not None:
                if good is not None and good[0] is doc:
                    families = good[1]
                else:
                    families = self._build(doc, "part", name)
                    with self._lock:
                        if families is None:
                            healthy = False
                            if doc is not self._bad.get(name):
                                self._bad[name] = doc
                                self._build_errors += 1
                        else:
                            self._good[name] = good = (doc, families)
                    if families is None and good is not None:
                        doc, families = good
            label = "" if name == WHOLE else str((doc or {}).get("workspace") or name)
            parts[name] = PartView(name, label, healthy, doc if families is not None else None, families)
        with self._lock:
            self._good = {n: g for n, g in self._good.items() if n in parts}
            errors = state.load_errors + self._build_errors
        served = [p.doc for p in parts.values() if p.doc is not None]
        newest = max(served, key=lambda d: num(d.get("generated_at_seconds")) or 0, default=None)
        shared = self._build(newest, "shared", "") if newest is not None else None
        return SnapshotView(key, state.listed, errors, parts, shared)

    def health(self, view: SnapshotView) -> list[Metric]:
        """The series computed on every scrape: readability, load errors, each served part's age."""
        head = Families()
        per_part = [p for p in view.parts.values() if p.name != WHOLE]
        labels = ["workspace"] if per_part else []
        readable, generated, age = (BY_NAME[n] for n in ("secscan_snapshot_readable",
                                                         "secscan_snapshot_generated_timestamp_seconds",
                                                         "secscan_snapshot_age_seconds"))
        if not view.parts:
            head.gauge(readable.name, readable.help, [], [], 0)
        for part in view.parts.values():
            values = [part.workspace] if labels else []
            head.gauge(readable.name, readable.help, labels, values, 1 if part.healthy and view.listed else 0)
            stamp = num(part.doc.get("generated_at_seconds")) if part.doc is not None else None
            if stamp is not None:
                head.gauge(generated.name, generated.help, labels, values, stamp)
                head.gauge(age.name, age.help, labels, values, self.clock() - stamp)
        errors = BY_NAME["secscan_snapshot_load_errors"]
        head.counter(errors.name, errors.help, [], [], view.errors)
        return list(head.items.values())

    def _build(self, doc: dict[str, Any], scope: str, name: str) -> Families | None:
        """The document's families, or None when they cannot be built, whatever the reason (the part is then
        unreadable): one line the first time a document fails."""
        f = Families()
        try:
            fill(f, doc, self.critical_info_limit, scope=scope)
        except Exception as exc:  # a part that parses but does not build must not stop the scrape
            with self._lock:
                said = self._said.get((scope, name)) is doc
                self._said[(scope, name)] = doc
            if not said:
                log.warning("snapshot part %r (workspace %r) parses but its series cannot be built (%s: %s): "
                            "it is not served", name, str(doc.get("workspace"))[:80], type(exc).__name__,
                            str(exc)[:200])
            return None
        return f
