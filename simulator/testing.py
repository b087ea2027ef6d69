"""The simulator as a test fixture: a real HTTP server in a background thread plus handles on its world.

    from simulator.testing import serve_simulator, SimConfig
    with serve_simulator(SimConfig(seed=7, clock="driven", control=True)) as sim:
        httpx.get(sim.base_url + "/projects", headers={"Authorization": f"Bearer {sim.api_key}"})
        sim.run_round()

Everything goes over loopback HTTP, as the product's client will; the Python handles only drive time and
the world, as the application and the scanners would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .config import SimConfig
from .model import Issue, Target
from .server import ServerThread, build_runtime
from .world import World

__all__ = ["SimConfig", "Simulator", "serve_simulator"]


class Simulator:
    """A running simulator; read `world` for assertions, change it only through these methods."""

    def __init__(self, server: ServerThread) -> None:
        self._server = server
        self.rt = server.rt

    @property
    def base_url(self) -> str:
        return self._server.base_url

    @property
    def root_url(self) -> str:
        return self._server.base_url[: -len("/v1")]

    @property
    def world(self) -> World:
        return self.rt.world

    @property
    def keys(self) -> dict[str, str]:
        return dict(self.world.keys)

    @property
    def api_key(self) -> str:
        return self.world.keys["pro"]

    @property
    def workspace_id(self) -> str:
        return self.world.main_workspace_id

    def headers(self, key: str = "pro") -> dict[str, str]:
        """Authorization header for a key name of `keys` (or a raw credential)."""
        return {"Authorization": f"Bearer {self.world.keys.get(key, key)}"}

    def now(self) -> float:
        return self.world.now()

    def advance(self, seconds: float) -> float:
        """Move the clock; due scans finish (and evolve issues) at their own due time."""
        return self.world.advance(seconds)

    def run_round(self, fraction: float = 1.0, workspace_id: str | None = None) -> dict[str, Any]:
        return self.world.run_round(fraction, workspace_id)

    def set_faults(self, **kw: Any) -> None:
        self.rt.faults.set(**kw)

    def clear_faults(self) -> None:
        self.rt.faults.clear()

    def set_readings(self, **readings: bool) -> None:
        """Serve another reading of a loose rule from now on (see simulator.config.READINGS)."""
        from .config import parse_readings

        with self.world.lock:
            self.rt.config.readings = parse_readings({**self.rt.config.readings, **readings})

    def set_rate_limit(self, limit: int | None = None, window: float | None = None) -> None:
        self.rt.limiter.configure(limit, window)

    def request_count(self, key: str | None = None, route: str | None = None, method: str | None = None) -> int:
        return self.rt.request_count(key=key, route=route, method=method)

    def set_usage(self, key: str = "pro", **values: int) -> None:
        """Put the key's workspace in a quota state: `quick_scans`, `audits`, `fixes` (used this period),
        `pack_scans`, `pack_fixes`, `free_fixes_left`. Lets a test reach a 402 without spending 200 scans."""
        w = self.world
        with w.lock:
            ws = w.workspaces[w.credentials[w.keys.get(key, key)].workspace_id]
            for name, value in values.items():
                if name in ws.used:
                    ws.used[name] = int(value)
                elif name in ("pack_scans", "pack_fixes", "free_fixes_left"):
                    setattr(ws, name, int(value))
                else:
                    raise ValueError(f"unknown usage field {name!r}")
            w.touch()

    def add_issue(self, target_id: str, severity: str = "critical", control_id: str | None = None) -> Issue:
        return self.world.add_issue(target_id, severity, control_id)

    def scan_finds(self, issue_id: str, *, status: str | None = None, severity: str | None = None) -> Issue:
        """A scan of the issue's target, now, finds it `status` ("fixed", or "open" again after a fix) and at
        `severity`; a repository is analysed at a new commit. Lets a test stage one exact change."""
        from .evolve import commit_of, fix, reopen

        w = self.world
        with w.lock:
            issue = w.issues[issue_id]
            t = w.targets[issue.target_id]
            now = w.now()
            commit = commit_of(w.new_id()) if t.kind == "repository" else None
            if status == "fixed":
                fix(issue, now)
            elif status == "open" and issue.status == "fixed":
                reopen(issue, now, commit)
            elif status is not None:
                raise ValueError(f"a scan finds an issue fixed or open, not {status!r}")
            if severity is not None:
                issue.severity = severity
            if issue.status != "fixed":
                issue.last_seen_at = now
                issue.commit = commit or issue.commit
            t.last_scan_at = now
            w.rescore(t)
            w.touch()
            return issue

    def verify_target(self, target_id: str, verified: bool = True, proof_holds: bool = True) -> Target:
        return self.world.set_verified(target_id, verified, proof_holds)

    def unverify_target(self, target_id: str) -> Target:
        return self.world.set_verified(target_id, False)

    def pause_project(self, project_id: str, paused: bool = True) -> None:
        self.world.set_paused(project_id, paused)

    def delete_project(self, project_id: str) -> None:
        self.world.delete_project(project_id)

    def remove_target(self, target_id: str) -> None:
        self.world.remove_target(target_id)

    def project_ids(self, key: str = "pro") -> list[str]:
        """Projects of the key's workspace, oldest first (as the API lists them)."""
        ws_id = self.world.credentials[self.world.keys.get(key, key)].workspace_id
        with self.world.lock:
            return [p.id for p in self.world.projects_ordered(ws_id)]

    def target_ids(self, key: str = "pro", *, kind: str | None = None, verified: bool | None = None) -> list[str]:
        out = []
        with self.world.lock:
            for pid in self.project_ids(key):
                for tid in self.world.projects[pid].target_ids:
                    t = self.world.targets[tid]
                    if (kind is None or t.kind == kind) and (verified is None or t.verified == verified):
                        out.append(tid)
        return out


@contextmanager
def serve_simulator(config: SimConfig | None = None, **overrides: Any) -> Iterator[Simulator]:
    """Start a simulator on a free loopback port for the duration of the `with` block."""
    cfg = config or SimConfig()
    if overrides:
        cfg = SimConfig(**{**cfg.__dict__, **overrides})
    server = ServerThread(build_runtime(cfg)).start()
    try:
        yield Simulator(server)
    finally:
        server.stop()

