"""What the rule mixins (ScanRules, IssueRules, Rounds) ask of the `World` they are mixed into.

A mixin cannot name `World` as its `self` type (World is its subclass); a protocol of the state and the
methods they share lets each mixin be checked on its own, and `World` is checked against it where a mixin's
method is called on one.
"""

from __future__ import annotations

import random
import threading
from typing import Protocol

from .config import SimConfig
from .evolve import Changes
from .model import Issue, Project, Scan, Target, Workspace


class WorldState(Protocol):
    config: SimConfig
    seed: int
    lock: threading.RLock
    workspaces: dict[str, Workspace]
    projects: dict[str, Project]
    targets: dict[str, Target]
    scans: dict[str, Scan]
    issues: dict[str, Issue]
    main_workspace_id: str
    _queue: list[tuple[float, str]]
    _rounds: int

    # World's own
    def new_id(self) -> str: ...
    def now(self) -> float: ...
    def touch(self) -> None: ...
    def tick(self) -> None: ...
    def target_in(self, ws_id: str, target_id: str) -> Target: ...
    def issue_in(self, ws_id: str, issue_id: str) -> Issue: ...
    def target_visible(self, t: Target) -> bool: ...
    def rescore(self, t: Target, scanned: bool = True) -> None: ...

    # one mixin's, called from another
    def running_scan(self, t: Target) -> Scan | None: ...
    def recent_scan(self, t: Target, kind: str, now: float) -> Scan | None: ...
    def create_scan(self, t: Target, kind: str, *, audit_fallback: bool = False, created_at: float | None = None,
                    duration: float | None = None) -> Scan: ...
    def finish_scan(self, scan: Scan, at: float) -> Changes: ...
    def charge_scan(self, ws: Workspace, quota: str) -> None: ...
    def new_issue(self, t: Target, rng: random.Random, now: float, *, severity: str | None = None,
                  commit: str | None = None, control_id: str | None = None) -> Issue: ...
    def _guarantee(self, targets: list[Target], ch: Changes, rng: random.Random, now: float) -> None: ...
