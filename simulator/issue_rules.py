"""Issue actions: issues found, marks with their reason rules, fixes unlocked, rechecks with their ceiling."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from .catalog import SEVERITIES
from .errors import ApiError, not_found
from .evolve import controls_for, fix, vary_location
from .model import DAY, Issue, Target

if TYPE_CHECKING:
    from .state import WorldState


class IssueRules:
    """Mixed into World; methods expect the caller to hold `World.lock` unless they take it themselves."""

    def new_issue(self: WorldState, t: Target, rng: random.Random, now: float, *, severity: str | None = None,
                  commit: str | None = None, control_id: str | None = None) -> Issue:
        """An issue found for the first time on `t`; its location is made unique among the target's issues."""
        controls = controls_for(t)
        control = next((c for c in controls if c.id == control_id), None) or rng.choice(controls)
        if severity is None:
            severity = control.severity
        used = {self.issues[i].location for i in t.issue_ids if self.issues[i].control_id == control.id}
        base = rng.choice(control.locations)
        k = 0
        while vary_location(base, k) in used:
            k += 1
        issue = Issue(id=self.new_id(), project_id=t.project_id, target_id=t.id, control_id=control.id,
                      severity=severity, confidence=control.confidence, location=vary_location(base, k),
                      first_seen_at=now, last_seen_at=now, commit=commit)
        self.issues[issue.id] = issue
        t.issue_ids.append(issue.id)
        self.touch()
        return issue

    def add_issue(self: WorldState, target_id: str, severity: str = "critical", control_id: str | None = None) -> Issue:
        """Control surface: a new issue found now on a target (for alert tests)."""
        with self.lock:
            t = self.targets.get(target_id)
            if t is None:
                raise not_found()
            if severity not in SEVERITIES:
                raise ApiError(400, "parameter_invalid", param="severity")
            rng = random.Random(f"{self.seed}:add:{target_id}:{len(t.issue_ids)}")
            issue = self.new_issue(t, rng, self.now(), severity=severity, control_id=control_id)
            self.rescore(t)
            if t.last_scan_at is None:
                t.last_scan_at = self.now()
            return issue

    def mark_issue(self: WorldState, ws_id: str, issue_id: str, status: str, reason: str | None,
                   marked_by: str) -> Issue:
        issue = self.issue_in(ws_id, issue_id)
        if issue.status == "fixed":
            raise ApiError(409, "issue_already_fixed")
        if not self.target_visible(self.targets[issue.target_id]):
            raise ApiError(409, "proof_required")
        marked = ("false_positive", "accepted_risk")
        if (not self.config.readings["marks_switch_directly"] and issue.status in marked and status in marked
                and status != issue.status):
            raise ApiError(400, "parameter_invalid", param="status")  # undo to open first
        if status == "open":
            issue.status, issue.status_reason, issue.marked_by = "open", None, None
        else:
            issue.status, issue.status_reason, issue.marked_by = status, reason, marked_by
        self.rescore(self.targets[issue.target_id], scanned=False)
        self.touch()
        return issue

    def recheck(self: WorldState, ws_id: str, issue_id: str) -> dict[str, Any]:
        """Recheck one issue now; free up to the daily ceiling of its project."""
        issue = self.issue_in(ws_id, issue_id)
        t = self.targets[issue.target_id]
        if not self.target_visible(t):
            raise ApiError(409, "proof_required")
        p = self.projects[issue.project_id]
        now = self.now()
        day = int(now // DAY)
        used = p.rechecks.get(day, 0)
        if used >= self.config.recheck_limit:
            raise ApiError(429, "recheck_limit_reached", headers={"Retry-After": str(int((day + 1) * DAY - now) + 1)})
        p.rechecks = {day: used + 1}
        analysed = True
        if t.kind == "repository":
            # A repository recheck starts at most one analysis per 15 minutes; otherwise the last result stands.
            analysed = t.last_repo_recheck_at is None or now - t.last_repo_recheck_at >= 900
            if analysed:
                t.last_repo_recheck_at = now
        before = issue.status
        if analysed:
            issue.rechecks += 1
            rng = random.Random(f"{self.seed}:recheck:{issue.id}:{issue.rechecks}")
            still_there = rng.random() < 0.6
            if still_there:
                if issue.status != "fixed":
                    issue.last_seen_at = now
            elif issue.status == "open":
                fix(issue, now)
            self.rescore(t, scanned=False)
            self.touch()
        return {"before": before, "analysed": analysed, "checked_at": now, "remaining": self.config.recheck_limit
                - used - 1}

    def unlock_fix(self: WorldState, ws_id: str, issue_id: str) -> tuple[Issue, bool]:
        """Unlock the fix of an issue: free fixes given once, then the period quota, then pack credits."""
        issue = self.issue_in(ws_id, issue_id)
        if not self.target_visible(self.targets[issue.target_id]):
            raise ApiError(409, "proof_required")
        if issue.fix_unlocked:
            return issue, False
        ws = self.workspaces[ws_id]
        if ws.free_fixes_left > 0:
            ws.free_fixes_left -= 1
        elif ws.used["fixes"] < ws.quota_limit("fixes"):
            ws.used["fixes"] += 1
        elif ws.pack_fixes > 0:
            ws.pack_fixes -= 1
        else:
            raise ApiError(402, "fix_quota_exceeded")
        issue.fix_unlocked = True
        self.touch()
        return issue, True

