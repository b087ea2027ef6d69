"""The simulator's state objects. Times are Unix seconds (floats) on the simulator clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PLANS: dict[str, dict[str, Any]] = {
    # Per plan: projects included, quotas per period, fixes given once, addresses per project, features.
    "free": {"projects": 1, "quick_scans": 10, "audits": 0, "fixes": 0, "free_fixes": 3, "addresses": 1,
             "features": {"full_audit": False, "repositories": False, "ai_fix": False, "alerts": False},
             "history_days": 30},
    "solo": {"projects": 1, "quick_scans": 30, "audits": 60, "fixes": 15, "free_fixes": 0, "addresses": 5,
             "features": {"full_audit": True, "repositories": False, "ai_fix": True, "alerts": True},
             "history_days": 365},
    "pro": {"projects": 3, "quick_scans": 100, "audits": 60, "fixes": 30, "free_fixes": 0, "addresses": 20,
            "features": {"full_audit": True, "repositories": True, "ai_fix": True, "alerts": True},
            "history_days": 365},
}
HOUR = 3600.0
DAY = 86400.0
PERIOD_SECONDS = 30 * DAY
TRIAL_SECONDS = 14 * 86400.0


@dataclass(slots=True)
class Workspace:
    id: str
    name: str
    plan: str
    extra_projects: int = 0
    trial_started_at: float | None = None
    period_start: float = 0.0
    used: dict[str, int] = field(default_factory=lambda: {"quick_scans": 0, "audits": 0, "fixes": 0})
    free_fixes_left: int = 0
    pack_scans: int = 0
    pack_fixes: int = 0
    project_ids: list[str] = field(default_factory=list)
    repo_analyses: list[float] = field(default_factory=list)  # start times, for the 24 h ceiling

    @property
    def spec(self) -> dict[str, Any]:
        return PLANS[self.plan]

    @property
    def project_limit(self) -> int:
        included: int = self.spec["projects"]
        return included + self.extra_projects

    def quota_limit(self, name: str) -> int:
        """Each project beyond those included adds its share of the plan's quota."""
        base: int = self.spec[name]
        included: int = self.spec["projects"]
        return base + (base * self.extra_projects) // included


@dataclass(slots=True)
class Credential:
    name: str  # shown as marked_by and in request counts; never the secret itself
    secret: str
    workspace_id: str
    lang: str = "en"
    scopes: frozenset[str] | None = None  # None = API key with every permission
    revoked: bool = False


@dataclass(slots=True)
class Project:
    id: str
    workspace_id: str
    name: str
    created_at: float
    paused: bool = False
    target_ids: list[str] = field(default_factory=list)
    rechecks: dict[int, int] = field(default_factory=dict)  # UTC day number -> rechecks used


@dataclass(slots=True)
class Target:
    id: str
    project_id: str
    kind: str  # domain | repository
    address: str
    verified: bool
    created_at: float
    proof_holds: bool = True  # false: verified once, but the proof no longer holds (audit falls back)
    score: int | None = None
    grade: str | None = None
    last_scan_at: float | None = None
    open_issues: int = 0  # open issues, hidden or not; kept current by World.rescore
    scan_ids: list[str] = field(default_factory=list)
    issue_ids: list[str] = field(default_factory=list)
    scans_done: int = 0  # drives the per-scan RNG so evolution does not depend on scheduling order
    last_repo_recheck_at: float | None = None


@dataclass(slots=True)
class Scan:
    id: str
    target_id: str
    project_id: str
    kind: str
    created_at: float
    due_at: float
    status: str = "queued"
    score: int | None = None
    grade: str | None = None
    coverage: float | None = None
    audit_fallback: bool = False
    finished_at: float | None = None
    will_fail: bool = False


@dataclass(slots=True)
class Issue:
    id: str
    project_id: str
    target_id: str
    control_id: str
    severity: str
    confidence: str
    location: str
    first_seen_at: float
    last_seen_at: float
    status: str = "open"
    fixed_at: float | None = None
    fix_unlocked: bool = False
    status_reason: str | None = None
    marked_by: str | None = None
    commit: str | None = None
    rechecks: int = 0
