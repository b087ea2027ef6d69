"""Shared helpers for the tests that talk to the bundled simulator over real HTTP."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from pipelines.api import ScanningClient


class SkipClock:
    """Wall time plus whatever the client 'slept': backoff and Retry-After are honoured in virtual time.

    The simulator's rate limiter runs on wall time, so tests of the real budget use ``time`` itself instead.
    """

    def __init__(self) -> None:
        self.offset = 0.0
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def time(self) -> float:
        return time.time() + self.offset

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.offset += seconds


def pages(n: int, page_size: int = 100) -> int:
    """Requests a list of ``n`` items needs at best: an empty list still costs one."""
    return max(1, math.ceil(n / page_size))


def minimum_sync(sim: Any, key: str = "pro") -> int:
    """1 account + project pages + per project its scan pages and issue pages (the figure of issue 6)."""
    world = sim.world
    with world.lock:
        ws = world.credentials[world.keys[key]].workspace_id
        projects = world.projects_ordered(ws)
        total = 1 + pages(len(projects))
        for p in projects:
            total += pages(len(world.scans_ordered(p))) + pages(len(world.issues_ordered(p)))
    return total


def full_walk(client: ScanningClient) -> dict[str, Any]:
    """What a first sync reads: the account, every project, every scan and every issue."""
    account = client.get_account()
    projects = client.list_projects()
    scans = {p["id"]: list(client.iter_scans(p["id"])) for p in projects}
    issues = {p["id"]: client.list_issues(p["id"]) for p in projects}
    return {"account": account, "projects": projects, "scans": scans, "issues": issues}
