"""Figures 1 to 3: what a sync costs in requests, against the floor the data sets (see `oracle`).

The budget (120 requests a minute, shared with the agent server) is what limits freshness, so these are
the first figures of merit. They are deterministic for a seed and scale: the quick test asserts on them.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.figures import INFO, Figure, judge
from benchmarks.oracle import Oracle, WorldState
from benchmarks.sim import SimProcess
from benchmarks.syncing import sync_in_process

# Past the simulator's scan duration (30 s of its driven clock), so the new scan has finished.
SCAN_DONE_AFTER = 31.0


@dataclass
class RequestFigures:
    figures: list[Figure]
    state: WorldState  # the world as first synced, reused by the merge figure


def measure(scale: str, seed: int, workdir: Path) -> RequestFigures:
    db = str(Path(tempfile.mkdtemp(prefix="requests-", dir=workdir)) / "history.duckdb")
    with SimProcess(scale=scale, seed=seed, rate_limit=1_000_000) as sim:
        oracle = Oracle(sim.base_url, sim.api_key)
        try:
            state = oracle.state()
            first = sync_in_process(sim, db)
            unchanged = sync_in_process(sim, db)
            full = sync_in_process(sim, db, full_reconcile=True)
            started = oracle.start_one_scan(state.projects)
            if started is None:
                raise RuntimeError("no target of the world would take a new scan")
            project_id, scan_id = started
            sim.advance(SCAN_DONE_AFTER)
            one = sync_in_process(sim, db)
            _, issue_pages = oracle.walk_pages(f"/projects/{project_id}/issues")
        finally:
            oracle.close()
    for run in (first, unchanged, full, one):
        if not run.success:
            raise RuntimeError(f"a scanwatch sync failed: {run.error}")
    minimum = state.minimum_requests
    scan_pages = sum(v for k, v in state.pages.items() if k.startswith("scans:"))
    issue_pages_all = sum(v for k, v in state.pages.items() if k.startswith("issues:"))
    expected_one = unchanged.requests + 1 + issue_pages
    full_floor = 2 + len(state.projects) + issue_pages_all  # one scan page per project, every issue page
    world = {"projects": len(state.projects), "scans": sum(len(v) for v in state.scans.values()),
             "issues": len(state.all_issues()), "scale": scale, "seed": seed}
    return RequestFigures(state=state, figures=[
        Figure("first_sync_ratio", "requests of a first full sync / minimum the data needs",
               round(first.requests / minimum, 3), "x", "<= 1.10", judge(first.requests <= 1.10 * minimum),
               {"requests": first.requests, "minimum": minimum, "service_counted": first.service_requests,
                "by_asset": first.by_asset, "seconds": round(first.seconds, 2),
                "project_pages": state.pages["projects"], "scan_pages": scan_pages, "issue_pages": issue_pages_all,
                "world": world}),
        Figure("unchanged_resync_requests", "requests of a re-sync of an unchanged workspace",
               unchanged.requests, "requests", "2", judge(unchanged.requests == 2),
               {"by_asset": unchanged.by_asset, "seconds": round(unchanged.seconds, 2)}),
        Figure("full_reconcile_requests", "requests of a full reconcile (every 6 h) of an unchanged workspace",
               full.requests, "requests", f"reported (floor {full_floor})", INFO,
               {"by_asset": full.by_asset, "floor": full_floor, "seconds": round(full.seconds, 2)}),
        Figure("one_new_scan_requests", "requests after one project had one new scan",
               one.requests, "requests", f"<= {expected_one} (unchanged + 1 scan page + {issue_pages} issue pages)",
               judge(one.requests <= expected_one),
               {"by_asset": one.by_asset, "expected": expected_one, "project_issue_pages": issue_pages,
                "project_id": project_id, "scan_id": scan_id, "seconds": round(one.seconds, 2)}),
    ])
