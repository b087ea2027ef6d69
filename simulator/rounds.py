"""What the application and the tests do to a world from outside the API: rounds of scheduled scans,
proving a site, pausing or deleting a project, and the removals the list-mutation fault needs."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from .errors import not_found
from .evolve import Changes, fix, shifted
from .model import Issue, Project, Target

if TYPE_CHECKING:
    from .state import WorldState


class Rounds:
    """Mixed into World; the public methods take `World.lock` themselves."""

    def run_round(self: WorldState, fraction: float = 1.0, workspace_id: str | None = None) -> dict[str, Any]:
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

    def _guarantee(self: WorldState, targets: list[Target], ch: Changes, rng: random.Random, now: float) -> None:
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

    def set_verified(self: WorldState, target_id: str, verified: bool = True, proof_holds: bool = True) -> Target:
        with self.lock:
            t = self.targets.get(target_id)
            if t is None:
                raise not_found()
            t.verified, t.proof_holds = verified, proof_holds
            self.touch()
            return t

    def set_paused(self: WorldState, project_id: str, paused: bool = True) -> Project:
        with self.lock:
            p = self.projects.get(project_id)
            if p is None:
                raise not_found()
            p.paused = paused
            self.touch()
            return p

    def delete_project(self: WorldState, project_id: str) -> None:
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

    def remove_target(self: WorldState, target_id: str) -> None:
        """The application removes a target: its scans and issues go with it (the API then answers 404)."""
        with self.lock:
            t = self.targets.pop(target_id, None)
            if t is None:
                raise not_found()
            self.projects[t.project_id].target_ids.remove(target_id)
            for sid in t.scan_ids:
                self.scans.pop(sid, None)
            for iid in t.issue_ids:
                self.issues.pop(iid, None)
            self.touch()

    def remove_scan(self: WorldState, scan_id: str) -> None:
        scan = self.scans.pop(scan_id)
        self.targets[scan.target_id].scan_ids.remove(scan_id)
        self.touch()

    def remove_issue(self: WorldState, issue_id: str) -> None:
        issue = self.issues.pop(issue_id)
        t = self.targets[issue.target_id]
        t.issue_ids.remove(issue_id)
        self.rescore(t, scanned=False)
        self.touch()

