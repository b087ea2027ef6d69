"""How a finished scan changes its target's issues.

Each scan draws from an RNG seeded by (world seed, target id, how many scans the target finished), so
the same world driven the same way evolves identically whatever the order scans finish in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .catalog import DOMAIN_CONTROLS, REPOSITORY_CONTROLS, SEVERITIES, Control
from .model import Issue, Scan, Target

if TYPE_CHECKING:
    from .state import WorldState

P_FIX = 0.06
P_REOPEN = 0.03
P_SEVERITY = 0.03
NEW_CHOICES = (0, 0, 1, 1, 1, 2, 3)


@dataclass
class Changes:
    """What a scan or a round did to issues, by issue id, for tests and the control surface."""

    new: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    reopened: list[str] = field(default_factory=list)
    severity_changed: list[str] = field(default_factory=list)

    def extend(self, other: Changes) -> None:
        self.new += other.new
        self.fixed += other.fixed
        self.reopened += other.reopened
        self.severity_changed += other.severity_changed

    def counts(self) -> dict[str, int]:
        return {"new": len(self.new), "fixed": len(self.fixed), "reopened": len(self.reopened),
                "severity_changed": len(self.severity_changed)}


def controls_for(target: Target) -> tuple[Control, ...]:
    return REPOSITORY_CONTROLS if target.kind == "repository" else DOMAIN_CONTROLS


def commit_of(scan_id: str) -> str:
    """The commit a repository analysis looked at: derived from the scan so it needs no storage."""
    return scan_id.replace("-", "")[:7]


def vary_location(base: str, k: int) -> str:
    """A distinct location for the k-th issue of one check on one target, so identities stay unique."""
    if k == 0:
        return base
    if base.startswith("table:"):
        return f"{base}_{k}"
    if base.startswith("port:"):
        return f"{base}{k}"
    if base.startswith("/"):
        return f"/s{k}{base}"
    file, _, line = base.rpartition(":")
    return f"{file}:{int(line) + 13 * k}" if line.isdigit() else f"{base}.{k}"


def shifted(severity: str, rng: random.Random) -> str:
    i = SEVERITIES.index(severity) if severity in SEVERITIES else 2
    j = i + rng.choice((-1, 1))
    if j < 0 or j >= len(SEVERITIES):
        j = i - (j - i)
    return SEVERITIES[j]


def evolve(world: WorldState, target: Target, scan: Scan, rng: random.Random) -> Changes:
    """Apply one done scan to the target's issues: fixes, regressions of the same id, severity moves, news."""
    now = scan.finished_at or scan.created_at
    commit = commit_of(scan.id) if target.kind == "repository" else None
    ch = Changes()
    reopened_budget = 1 + (rng.random() < 0.2)
    for iid in target.issue_ids:
        issue = world.issues[iid]
        r = rng.random()
        if issue.status == "fixed":
            if reopened_budget and r < P_REOPEN:
                reopened_budget -= 1
                reopen(issue, now, commit)
                ch.reopened.append(iid)
            continue
        if issue.status == "open" and r < P_FIX:
            fix(issue, now)
            ch.fixed.append(iid)
            continue
        issue.last_seen_at = now
        if commit:
            issue.commit = commit
        if issue.status == "open" and rng.random() < P_SEVERITY:
            issue.severity = shifted(issue.severity, rng)
            ch.severity_changed.append(iid)
    for _ in range(rng.choice(NEW_CHOICES)):
        ch.new.append(world.new_issue(target, rng, now, commit=commit).id)
    return ch


def fix(issue: Issue, now: float) -> None:
    issue.status = "fixed"
    issue.fixed_at = now


def reopen(issue: Issue, now: float, commit: str | None) -> None:
    """A regression keeps the issue's id: the same check finds the same thing again."""
    issue.status = "open"
    issue.fixed_at = None
    issue.last_seen_at = now
    if commit:
        issue.commit = commit
