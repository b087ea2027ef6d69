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
from typing import Any

from .catalog import SEVERITIES, SEVERITY_RANK
from .clock import Clock
from .config import SimConfig
from .errors import ApiError, not_found
from .evolve import Changes, controls_for, evolve, fix, vary_location
from .model import PERIOD_SECONDS, Credential, Issue, Project, Scan, Target, Workspace
from .scoring import grade_of, score_of

HOUR = 3600.0
DAY = 86400.0


class World:
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
        self._ids = random.Random(f"{config.seed}:ids")
        self._queue: list[tuple[float, str]] = []
        self._cache: dict[tuple, tuple[int, list]] = {}
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
        scores = [self.targets[tid].score for tid in p.target_ids if self.targets[tid].score is not None]
        return round(sum(scores) / len(scores)) if scores else None

    def project_last_scan(self, p: Project) -> float | None:
        times = [self.targets[tid].last_scan_at for tid in p.target_ids if self.targets[tid].last_scan_at]
        return max(times) if times else None

    def rescore(self, t: Target, scanned: bool = True) -> None:
        issues = [self.issues[i] for i in t.issue_ids]
        t.open_issues = sum(1 for i in issues if i.status == "open")
        if scanned or t.score is not None:
            t.score = score_of(issues)
            t.grade = grade_of(t.score)

    # ---------------------------------------------------------------- ordered lists (cached per version)
    def _cached(self, key: tuple, build: Callable[[], list]) -> list:
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

    # ---------------------------------------------------------------- scans
    def running_scan(self, t: Target) -> Scan | None:
        for sid in reversed(t.scan_ids):
            s = self.scans[sid]
            if s.status == "queued":
                return s
        return None

    def recent_scan(self, t: Target, kind: str, now: float) -> Scan | None:
        """A done scan of this kind finished within the hour; a failed one may be retried at once."""
        for sid in reversed(t.scan_ids):
            s = self.scans[sid]
            if s.kind == kind and s.status == "done" and s.finished_at is not None and now - s.finished_at < HOUR:
                return s
            if s.created_at < now - 2 * HOUR:
                break
        return None

    def create_scan(self, t: Target, kind: str, *, audit_fallback: bool = False, created_at: float | None = None,
                    duration: float | None = None) -> Scan:
        now = self.now() if created_at is None else created_at
        sid = self.new_id()
        rng = random.Random(f"{self.seed}:scan:{sid}")
        scan = Scan(id=sid, target_id=t.id, project_id=t.project_id, kind=kind, created_at=now,
                    due_at=now + (self.config.scan_seconds if duration is None else duration),
                    audit_fallback=audit_fallback, will_fail=rng.random() < self.config.scan_failure_rate)
        self.scans[sid] = scan
        t.scan_ids.append(sid)
        heapq.heappush(self._queue, (scan.due_at, sid))
        self.touch()
        return scan

    def finish_scan(self, scan: Scan, at: float) -> Changes:
        t = self.targets[scan.target_id]
        scan.finished_at = at
        self.touch()
        if scan.will_fail:
            scan.status = "failed"
            return Changes()
        rng = random.Random(f"{self.seed}:evolve:{t.id}:{t.scans_done}")
        t.scans_done += 1
        scan.status = "done"
        changes = evolve(self, t, scan, rng)
        self.rescore(t)
        scan.score, scan.grade = t.score, t.grade
        low = 0.5 if scan.kind == "quick" else 0.7  # a quick scan covers less than an audit
        scan.coverage = round(low + 0.3 * rng.random(), 2)
        t.last_scan_at = at
        return changes

    def start_scan(self, ws_id: str, target_id: str, kind: str | None) -> tuple[Scan, bool, float | None]:
        """POST /targets/{id}/scans. Returns (scan, reused, next_real_scan_at)."""
        t = self.target_in(ws_id, target_id)
        ws = self.workspaces[ws_id]
        project = self.projects[t.project_id]
        now = self.now()
        if kind is None:
            kind = "repository" if t.kind == "repository" else "quick"
        if (t.kind == "repository") != (kind == "repository"):
            raise ApiError(400, "target_kind_invalid")
        if project.paused:
            raise ApiError(402, "project_paused")
        if kind == "repository" and not ws.spec["features"]["repositories"]:
            raise ApiError(402, "repositories_not_in_plan")
        if kind == "audit":
            if not ws.spec["features"]["full_audit"]:
                raise ApiError(402, "audit_not_in_plan")
            if not t.verified:
                raise ApiError(409, "proof_required")
        running = self.running_scan(t)
        if running is not None:
            nxt = running.due_at + (HOUR if running.kind == kind else 0.0)
            return running, True, nxt
        recent = self.recent_scan(t, kind, now)
        if recent is not None:
            return recent, True, recent.finished_at + HOUR
        fallback = kind == "audit" and not t.proof_holds
        run_kind = "quick" if fallback else kind
        if run_kind == "repository":
            ws.repo_analyses = [x for x in ws.repo_analyses if now - x < DAY]
            if len(ws.repo_analyses) >= self.config.repository_analyses_per_day:
                retry = int(ws.repo_analyses[0] + DAY - now) + 1
                raise ApiError(429, "repository_analyses_limit_reached", headers={"Retry-After": str(retry)})
            ws.repo_analyses.append(now)
        else:
            self.charge_scan(ws, "audits" if run_kind == "audit" else "quick_scans")
        return self.create_scan(t, run_kind, audit_fallback=fallback), False, None

    def charge_scan(self, ws: Workspace, quota: str) -> None:
        """Period quota first, then pack credits, else the matching 402."""
        if ws.used[quota] < ws.quota_limit(quota):
            ws.used[quota] += 1
        elif ws.pack_scans > 0:
            ws.pack_scans -= 1
        else:
            raise ApiError(402, "audit_quota_exceeded" if quota == "audits" else "scan_quota_exceeded")
        self.touch()

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

    # ---------------------------------------------------------------- issues
    def new_issue(self, t: Target, rng: random.Random, now: float, *, severity: str | None = None,
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

    def add_issue(self, target_id: str, severity: str = "critical", control_id: str | None = None) -> Issue:
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

    def mark_issue(self, ws_id: str, issue_id: str, status: str, reason: str | None, marked_by: str) -> Issue:
        issue = self.issue_in(ws_id, issue_id)
        if issue.status == "fixed":
            raise ApiError(409, "issue_already_fixed")
        if not self.target_visible(self.targets[issue.target_id]):
            raise ApiError(409, "proof_required")
        if status == "open":
            issue.status, issue.status_reason, issue.marked_by = "open", None, None
        else:
            issue.status, issue.status_reason, issue.marked_by = status, reason, marked_by
        self.rescore(self.targets[issue.target_id], scanned=False)
        self.touch()
        return issue

    def recheck(self, ws_id: str, issue_id: str) -> dict[str, Any]:
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

    def unlock_fix(self, ws_id: str, issue_id: str) -> tuple[Issue, bool]:
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

    # ---------------------------------------------------------------- rounds and control
    def run_round(self, fraction: float = 1.0, workspace_id: str | None = None) -> dict[str, Any]:
        """One pass of the application's own monitoring schedule: scan (a deterministic share of) the
        workspace's targets and finish the scans now. Not charged to the API quotas. At least one new,
        fixed, reopened and re-severitied issue is guaranteed on visible targets when possible, so that
        ingestion tests always see every kind of change.
        """
        with self.lock:
            self.tick()
            ws = self.workspaces[workspace_id or self.main_workspace_id]
            self._rounds += 1
            rng = random.Random(f"{self.seed}:round:{ws.id}:{self._rounds}")
            targets = [self.targets[tid] for pid in ws.project_ids if not self.projects[pid].paused
                       for tid in self.projects[pid].target_ids]
            if fraction < 1.0:
                k = max(1, round(len(targets) * max(0.0, fraction))) if targets and fraction > 0 else 0
                targets = sorted(rng.sample(targets, k), key=lambda t: targets.index(t))
            now = self.now()
            changes = Changes()
            scan_ids, done, failed = [], 0, 0
            for t in targets:
                if self.running_scan(t) is not None:
                    continue
                scan = self.create_scan(t, "repository" if t.kind == "repository" else "quick", created_at=now,
                                        duration=0.0)
                scan_ids.append(scan.id)
                changes.extend(self.finish_scan(scan, now))
                done += scan.status == "done"
                failed += scan.status == "failed"
            self._guarantee(targets, changes, rng, now)
            self.touch()
            return {"round": self._rounds, "scans": len(scan_ids), "done": done, "failed": failed,
                    **changes.counts(), "scan_ids": scan_ids, "new_ids": changes.new, "fixed_ids": changes.fixed,
                    "reopened_ids": changes.reopened, "severity_changed_ids": changes.severity_changed}

    def _guarantee(self, targets: list[Target], ch: Changes, rng: random.Random, now: float) -> None:
        visible = [t for t in targets if self.target_visible(t) and self.scans[t.scan_ids[-1]].status == "done"]
        if not visible:
            return
        touched = set(ch.new + ch.fixed + ch.reopened + ch.severity_changed)

        def pick(status: str) -> Issue | None:
            pool = [self.issues[i] for t in visible for i in t.issue_ids
                    if self.issues[i].status == status and i not in touched]
            return rng.choice(pool) if pool else None

        if not ch.fixed and (issue := pick("open")) is not None:
            fix(issue, now)
            ch.fixed.append(issue.id)
            touched.add(issue.id)
        if not ch.reopened and (issue := pick("fixed")) is not None:
            issue.status, issue.fixed_at, issue.last_seen_at = "open", None, now
            ch.reopened.append(issue.id)
            touched.add(issue.id)
        if not ch.severity_changed and (issue := pick("open")) is not None:
            from .evolve import shifted
            issue.severity = shifted(issue.severity, rng)
            ch.severity_changed.append(issue.id)
            touched.add(issue.id)
        if not ch.new:
            t = rng.choice(visible)
            ch.new.append(self.new_issue(t, rng, now).id)
        for t in visible:
            self.rescore(t)
            last = self.scans[t.scan_ids[-1]]
            last.score, last.grade = t.score, t.grade

    def set_verified(self, target_id: str, verified: bool = True, proof_holds: bool = True) -> Target:
        with self.lock:
            t = self.targets.get(target_id)
            if t is None:
                raise not_found()
            t.verified, t.proof_holds = verified, proof_holds
            self.touch()
            return t

    def set_paused(self, project_id: str, paused: bool = True) -> Project:
        with self.lock:
            p = self.projects.get(project_id)
            if p is None:
                raise not_found()
            p.paused = paused
            self.touch()
            return p

    def delete_project(self, project_id: str) -> None:
        with self.lock:
            p = self.projects.pop(project_id, None)
            if p is None:
                raise not_found()
            self.workspaces[p.workspace_id].project_ids.remove(project_id)
            for tid in p.target_ids:
                t = self.targets.pop(tid)
                for sid in t.scan_ids:
                    self.scans.pop(sid, None)
                for iid in t.issue_ids:
                    self.issues.pop(iid, None)
            self.touch()

    def remove_scan(self, scan_id: str) -> None:
        scan = self.scans.pop(scan_id)
        self.targets[scan.target_id].scan_ids.remove(scan_id)
        self.touch()

    def remove_issue(self, issue_id: str) -> None:
        issue = self.issues.pop(issue_id)
        t = self.targets[issue.target_id]
        t.issue_ids.remove(issue_id)
        self.rescore(t, scanned=False)
        self.touch()

    def stats(self) -> dict[str, int]:
        return {"workspaces": len(self.workspaces), "projects": len(self.projects), "targets": len(self.targets),
                "scans": len(self.scans), "issues": len(self.issues)}
