"""Scan rules of the contract: kinds per target, reuse within the hour, quotas, pack credits, audits that
fall back, the repository ceiling; and what a finished scan does to its target."""

from __future__ import annotations

import heapq
import random
from typing import TYPE_CHECKING

from .errors import ApiError
from .evolve import Changes, evolve
from .model import DAY, HOUR, Scan, Target, Workspace
from .validation import is_excluded

if TYPE_CHECKING:
    from .state import WorldState


class ScanRules:
    """Mixed into World; methods expect the caller to hold `World.lock`."""

    def running_scan(self: WorldState, t: Target) -> Scan | None:
        for sid in reversed(t.scan_ids):
            s = self.scans[sid]
            if s.status == "queued":
                return s
        return None

    def recent_scan(self: WorldState, t: Target, kind: str, now: float) -> Scan | None:
        """A done scan of this kind finished within the hour; a failed one may be retried at once, unless the
        `failed_scan_reused` reading counts it too."""
        reusable = ("done", "failed") if self.config.readings["failed_scan_reused"] else ("done",)
        for sid in reversed(t.scan_ids):
            s = self.scans[sid]
            if s.kind == kind and s.status in reusable and s.finished_at is not None and now - s.finished_at < HOUR:
                return s
            if s.created_at < now - 2 * HOUR:
                break
        return None

    def create_scan(self: WorldState, t: Target, kind: str, *, audit_fallback: bool = False,
                    created_at: float | None = None, duration: float | None = None) -> Scan:
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

    def finish_scan(self: WorldState, scan: Scan, at: float) -> Changes:
        t = self.targets[scan.target_id]
        scan.finished_at = at
        self.touch()
        if scan.will_fail:
            scan.status = "failed"
            if self.config.readings["failed_scan_moves_last_scan"]:
                t.last_scan_at = at
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

    def start_scan(self: WorldState, ws_id: str, target_id: str, kind: str | None) -> tuple[Scan, bool, float | None]:
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
        if t.kind == "domain" and is_excluded(t.address):
            raise ApiError(409, "site_excluded")
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
        if recent is not None and recent.finished_at is not None:  # recent_scan returns finished scans only
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

    def charge_scan(self: WorldState, ws: Workspace, quota: str) -> None:
        """Period quota first, then pack credits, else the matching 402."""
        if ws.used[quota] < ws.quota_limit(quota):
            ws.used[quota] += 1
        elif ws.pack_scans > 0:
            ws.pack_scans -= 1
        else:
            raise ApiError(402, "audit_quota_exceeded" if quota == "audits" else "scan_quota_exceeded")
        self.touch()

