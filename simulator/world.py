"""The simulator's state and every rule that changes it.

Routes translate HTTP into calls on `World`; the control surface and the test helper call the same
methods, so a test that drives the world through Python sees exactly what a client would over HTTP.
All access goes through `World.lock` (the server thread and the test thread share the world).
"""

from __future__ import annotations

import heapq
import random
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from .catalog import SEVERITY_RANK
from .clock import Clock
from .config import SimConfig
from .errors import ApiError, not_found
from .issue_rules import IssueRules
from .model import DAY, PERIOD_SECONDS, Credential, Issue, Project, Scan, Target, Workspace
from .rounds import Rounds
from .scan_rules import ScanRules
from .scoring import grade_of, score_of

T = TypeVar("T")


class World(ScanRules, IssueRules, Rounds):
    def __init__(self, config: SimConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.seed = config.seed
        self.lock = threading.RLock()
        self.version = 0  # bumped on every change; list orders are cached per version
        self.workspaces: dict[str, Workspace] = {}
        self.credentials: dict[str, Credential] = {}  # secret -> credential
        self.keys: dict[str, str] = {}  # friendly name -> secret
        self.projects: dict[str, Project] = {}
        self.targets: dict[str, Target] = {}
        self.scans: dict[str, Scan] = {}
        self.issues: dict[str, Issue] = {}
        self.main_workspace_id = ""
        self.pro_workspace_ids: list[str] = []  # the main one first, then those of SimConfig.pro_workspaces
        self._ids = random.Random(f"{config.seed}:ids")
        self._queue: list[tuple[float, str]] = []
        self._cache: dict[tuple[Any, ...], tuple[int, list[Any]]] = {}
        self._rounds = 0

    # ---------------------------------------------------------------- identity and time
    def new_id(self) -> str:
        return str(uuid.UUID(int=self._ids.getrandbits(128), version=4))

    def now(self) -> float:
        return self.clock.now()

    def touch(self) -> None:
        self.version += 1

    # ---------------------------------------------------------------- scoped lookups (404 across workspaces)
    def project_in(self, ws_id: str, project_id: str) -> Project:
        p = self.projects.get(project_id)
        if p is None or p.workspace_id != ws_id:
            raise not_found()
        return p

    def target_in(self, ws_id: str, target_id: str) -> Target:
        t = self.targets.get(target_id)
        if t is None or self.projects[t.project_id].workspace_id != ws_id:
            raise not_found()
        return t

    def scan_in(self, ws_id: str, scan_id: str) -> Scan:
        s = self.scans.get(scan_id)
        if s is None or self.projects[s.project_id].workspace_id != ws_id:
            raise not_found()
        return s

    def issue_in(self, ws_id: str, issue_id: str) -> Issue:
        i = self.issues.get(issue_id)
        if i is None or self.projects[i.project_id].workspace_id != ws_id:
            raise not_found()
        return i

    # ---------------------------------------------------------------- visibility and derived values
    def target_visible(self, t: Target) -> bool:
        """Issue details of a site are hidden until its ownership is proved."""
        return t.kind == "repository" or t.verified

    def hidden_issues(self, t: Target) -> int | None:
        return None if self.target_visible(t) else t.open_issues

    def project_open_issues(self, p: Project) -> int:
        """Open issues a client can list: those of hidden sites are only counted in `hidden_issues`."""
        return sum(self.targets[tid].open_issues for tid in p.target_ids if self.target_visible(self.targets[tid]))

    def project_score(self, p: Project) -> int | None:
        scores = [s for s in (self.targets[tid].score for tid in p.target_ids) if s is not None]
        return round(sum(scores) / len(scores)) if scores else None

    def project_last_scan(self, p: Project) -> float | None:
        times = [t for t in (self.targets[tid].last_scan_at for tid in p.target_ids) if t]
        return max(times) if times else None

    def rescore(self, t: Target, scanned: bool = True) -> None:
        issues = [self.issues[i] for i in t.issue_ids]
        t.open_issues = sum(1 for i in issues if i.status == "open")
        if scanned or t.score is not None:
            t.score = score_of(issues)
            t.grade = grade_of(t.score)

    # ---------------------------------------------------------------- ordered lists (cached per version)
    def _cached(self, key: tuple[Any, ...], build: Callable[[], list[T]]) -> list[T]:
        hit = self._cache.get(key)
        if hit is not None and hit[0] == self.version:
            return hit[1]
        items = build()
        self._cache[key] = (self.version, items)
        return items

    def projects_ordered(self, ws_id: str) -> list[Project]:
        """Oldest first."""
        ws = self.workspaces[ws_id]
        return self._cached(("projects", ws_id), lambda: sorted(
            (self.projects[p] for p in ws.project_ids), key=lambda p: (p.created_at, p.id)))

    def scans_ordered(self, project: Project) -> list[Scan]:
        """Newest first, within the history the plan shows."""
        def build() -> list[Scan]:
            scans = [self.scans[s] for tid in project.target_ids for s in self.targets[tid].scan_ids]
            scans.sort(key=lambda s: (s.created_at, s.id), reverse=True)
            return scans
        scans = self._cached(("scans", project.id), build)
        days = self.workspaces[project.workspace_id].spec["history_days"]
        horizon = self.now() - days * DAY
        if scans and scans[-1].created_at < horizon:
            scans = [s for s in scans if s.created_at >= horizon]
        return scans

    def issues_ordered(self, project: Project) -> list[Issue]:
        """Worst first: severity, then first seen, then id; issues of hidden sites left out."""
        def build() -> list[Issue]:
            items = [self.issues[i] for tid in project.target_ids
                     if self.target_visible(self.targets[tid]) for i in self.targets[tid].issue_ids]
            items.sort(key=lambda i: (SEVERITY_RANK.get(i.severity, 9), i.first_seen_at, i.id))
            return items
        return self._cached(("issues", project.id), build)

    # ---------------------------------------------------------------- clock-driven changes
    def tick(self) -> None:
        """Finish every scan whose time has come and roll quota periods; called before each request."""
        now = self.now()
        while self._queue and self._queue[0][0] <= now:
            _, sid = heapq.heappop(self._queue)
            scan = self.scans.get(sid)
            if scan is not None and scan.status == "queued":
                self.finish_scan(scan, scan.due_at)
        for ws in self.workspaces.values():
            if now >= ws.period_start + PERIOD_SECONDS:
                periods = int((now - ws.period_start) // PERIOD_SECONDS)
                ws.period_start += periods * PERIOD_SECONDS
                ws.used = {k: 0 for k in ws.used}
                self.touch()

    def advance(self, seconds: float) -> float:
        with self.lock:
            self.clock.advance(seconds)
            self.tick()
            return self.now()

    # ---------------------------------------------------------------- projects and targets
    def create_project(self, ws_id: str, name: str, address: str | None) -> Project:
        ws = self.workspaces[ws_id]
        if len(ws.project_ids) >= ws.project_limit:
            raise ApiError(402, "project_limit_reached")
        now = self.now()
        p = Project(id=self.new_id(), workspace_id=ws_id, name=name, created_at=now)
        self.projects[p.id] = p
        ws.project_ids.append(p.id)
        if address is not None:
            self.add_target(p, "domain", address, verified=False, created_at=now)
        self.touch()
        return p

    def add_site(self, ws_id: str, project_id: str, address: str) -> Target:
        p = self.project_in(ws_id, project_id)
        ws = self.workspaces[ws_id]
        if p.paused:
            raise ApiError(402, "project_paused")
        if any(self.targets[t].address == address for t in p.target_ids):
            raise ApiError(409, "target_exists")
        if len(p.target_ids) >= ws.spec["addresses"]:
            raise ApiError(402, "address_limit_reached")
        return self.add_target(p, "domain", address, verified=False, created_at=self.now())

    def add_target(self, p: Project, kind: str, address: str, *, verified: bool, created_at: float) -> Target:
        t = Target(id=self.new_id(), project_id=p.id, kind=kind, address=address, verified=verified,
                   created_at=created_at)
        self.targets[t.id] = t
        p.target_ids.append(t.id)
        self.touch()
        return t

    def stats(self) -> dict[str, int]:
        return {"workspaces": len(self.workspaces), "projects": len(self.projects), "targets": len(self.targets),
                "scans": len(self.scans), "issues": len(self.issues)}
