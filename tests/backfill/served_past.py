"""The past a first deployment reconstructs, worked out in Python from what the service serves, without
scanwatch's SQL: the oracle of the Prometheus backfill (the reconstruction's own tables would only prove
the transport).

The rules are those docs/history.md and sql/backfill/README.md state, day by day at each UTC midnight ("the
state just before it"):

- an issue counts as open on a project, under its severity, from its `first_seen_at` until it was fixed; a
  fixed one was fixed at its `fixed_at` (else its last sighting, never before its first). One marked false
  positive or accepted risk before scanwatch first saw it never counts: the service keeps no time for
  marks. A project's cells (every severity of the contract, 0 when none is open) exist from its first issue on;
- a target's score is that of its last scan finished (status done, with a score) before the midnight, from
  its first such scan on; a project's is the mean of its targets that have one, halves away from zero;
- a day's new and fixed issues are those first seen, and fixed, within it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from benchmarks.oracle import Oracle

DAY = timedelta(days=1)
SEVERITIES = ("critical", "high", "medium", "low", "info")  # the contract's, worst first


def instant(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


@dataclass
class Span:
    project: str
    severity: str
    opened: datetime
    fixed: datetime | None


@dataclass
class ServedPast:
    """What the service serves, reduced to what the reconstruction reads."""

    spans: list[Span] = field(default_factory=list)
    scans: dict[str, list[tuple[datetime, int]]] = field(default_factory=dict)  # target -> (finished, score)
    target_project: dict[str, str] = field(default_factory=dict)

    @classmethod
    def walk(cls, base_url: str, api_key: str) -> ServedPast:
        oracle = Oracle(base_url, api_key)
        try:
            state = oracle.state()
        finally:
            oracle.close()
        past = cls()
        for issue in state.all_issues():
            opened = instant(issue.get("first_seen_at"))
            if opened is None or issue.get("severity") is None or issue.get("status") not in ("open", "fixed"):
                continue
            fixed = None
            if issue["status"] == "fixed":
                fixed = max(instant(issue.get("fixed_at") or issue.get("last_seen_at")) or opened, opened)
            past.spans.append(Span(issue["project_id"], issue["severity"], opened, fixed))
        for project_id, scans in state.scans.items():
            for scan in scans:
                finished = instant(scan.get("finished_at"))
                if scan.get("status") == "done" and scan.get("score") is not None and finished is not None:
                    past.scans.setdefault(scan["target_id"], []).append((finished, int(scan["score"])))
                    past.target_project[scan["target_id"]] = project_id
        return past

    def first_day(self) -> date:
        moments = [s.opened for s in self.spans] + [f for rows in self.scans.values() for f, _ in rows]
        return min(moments).date()

    def open_issues(self, days: list[date]) -> dict[tuple[str, str], dict[date, int]]:
        """{(project, severity): {day: issues open at the end of it}} over `days`, where the cell exists."""
        since: dict[str, datetime] = {}
        for s in self.spans:
            since[s.project] = min(since.get(s.project, s.opened), s.opened)
        severities = list(SEVERITIES) + sorted({s.severity for s in self.spans} - set(SEVERITIES))
        out: dict[tuple[str, str], dict[date, int]] = {}
        for day in days:
            at = midnight(day) + DAY
            counts = Counter((s.project, s.severity) for s in self.spans
                             if s.opened < at and not (s.fixed is not None and s.fixed < at))
            for project, first in since.items():
                if at > first:
                    for severity in severities:
                        out.setdefault((project, severity), {})[day] = counts[(project, severity)]
        return out

    def target_scores(self, days: list[date]) -> dict[str, dict[date, int]]:
        out: dict[str, dict[date, int]] = {}
        for target, rows in self.scans.items():
            ordered = sorted(rows)
            for day in days:
                at = midnight(day) + DAY
                before = [score for finished, score in ordered if finished < at]
                if before:
                    out.setdefault(target, {})[day] = before[-1]
        return out

    def project_scores(self, days: list[date]) -> dict[str, dict[date, int]]:
        targets = self.target_scores(days)
        out: dict[str, dict[date, int]] = {}
        for day in days:
            per_project: dict[str, list[int]] = {}
            for target, scores in targets.items():
                if day in scores:
                    per_project.setdefault(self.target_project[target], []).append(scores[day])
            for project, scores in per_project.items():
                mean = sum(scores) / len(scores)
                out.setdefault(project, {})[day] = math.floor(mean + 0.5)  # halves away from zero (> 0)
        return out

    def new_and_fixed(self) -> tuple[Counter[date], Counter[date]]:
        """Issues first seen, and fixed, per UTC day."""
        return (Counter(s.opened.date() for s in self.spans),
                Counter(s.fixed.date() for s in self.spans if s.fixed is not None))


def by_day(series: dict[Any, dict[date, int]], days: list[date]) -> dict[Any, dict[date, float]]:
    """The part of each series within `days`, as floats (Prometheus's values); series empty there dropped."""
    wanted = set(days)
    out = {key: {d: float(v) for d, v in values.items() if d in wanted} for key, values in series.items()}
    return {key: values for key, values in out.items() if values}
