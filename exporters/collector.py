"""The exporter's collector: each part's families built once per part, health series on every scrape.

It decides what a scrape serves when a part is new, missing or broken (that part's last good document), per
workspace. It is an ordinary prometheus-client custom collector, collected on every scrape: the library's
`make_wsgi_app` encodes it (format negotiation, gzip, `name[]` filtering), and `generate_latest` reads the
same. It has no `describe()` because its families depend on the snapshot: a registry without auto_describe
collects it for any `name[]` filter and keeps the matching samples. It also answers the probes (`ready`,
`problem`), from the same view a scrape serves.
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
    stored: int = 0  # parts in the store, every shard's
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
        served = [p.doc for p in parts.values() if p.doc is not None] if self.source.shard.first else []
        newest = max(served, key=lambda d: num(d.get("generated_at_seconds")) or 0, default=None)
        shared = self._build(newest, "shared", "") if newest is not None else None
        return SnapshotView(key, state.listed, errors, state.stored, parts, shared)

    def problem(self) -> str | None:
        """Why the exporter cannot say the truth about its parts now (the store's poll stopped or stuck), or
        None: the liveness probe's answer."""
        store_problem = getattr(self.source.store, "problem", None)
        return store_problem() if callable(store_problem) else None

    def ready(self, view: SnapshotView | None = None) -> bool:
        """Whether a scrape of `view` (default: the store now) serves a loaded snapshot: the readiness probe.

        True once a part of this exporter's share has loaded (or, for a shard whose share is empty, once the
        store lists any part at all), and while it stays so: a later unreadable part keeps its last good copy
        served. Not while the store's poll is stopped or stuck (`problem`): what it serves can no longer be told.
        """
        view = self.view() if view is None else view
        loaded = any(p.doc is not None for p in view.parts.values()) or (view.listed and not view.parts
                                                                         and view.stored > 0)
        return loaded and self.problem() is None

    def health(self, view: SnapshotView) -> list[Metric]:
        """The series computed on every scrape: readability, load errors, each served part's age."""
        head = Families()
        per_part = [p for p in view.parts.values() if p.name != WHOLE]
        labels = ["workspace"] if per_part else []
        readable, generated, age = (BY_NAME[n] for n in ("secscan_snapshot_readable",
                                                         "secscan_snapshot_generated_timestamp_seconds",
                                                         "secscan_snapshot_age_seconds"))
        if not view.parts and self.source.shard.first and (not view.listed or not view.stored):
            head.gauge(readable.name, readable.help, [], [], 0)  # no part to read at all: said once, by shard 0
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
