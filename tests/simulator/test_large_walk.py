"""A plain httpx loop walks every list at limit=100: the benchmark's access pattern.

The medium world runs in CI; the large one (the benchmark's own world, whose walk time `python -m benchmarks`
reports as the first sync) only in the soak.
"""

from __future__ import annotations

import httpx
import pytest

from simulator.testing import serve_simulator

from .conftest import sim_config


def walk_everything(base_url: str, headers: dict[str, str]) -> dict[str, int]:
    counts = {"requests": 0, "projects": 0, "scans": 0, "issues": 0}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as c:
        def walk(path: str) -> list[dict]:
            items: list[dict] = []
            cursor = None
            while True:
                params = {"limit": 100, **({"starting_after": cursor} if cursor else {})}
                r = c.get(path, params=params)
                counts["requests"] += 1
                r.raise_for_status()
                page = r.json()
                items += page["data"]
                if not page["has_more"]:
                    return items
                cursor = page["data"][-1]["id"]

        projects = walk("/projects")
        counts["projects"] = len(projects)
        for p in projects:
            counts["scans"] += len(walk(f"/projects/{p['id']}/scans"))
            counts["issues"] += len(walk(f"/projects/{p['id']}/issues"))
    return counts


def visible_issues(w) -> int:
    """Issues of the main workspace a client can list (those of unproved sites are hidden)."""
    main = w.workspaces[w.main_workspace_id].project_ids
    return sum(len(w.targets[t].issue_ids) for p in main for t in w.projects[p].target_ids
               if w.target_visible(w.targets[t]))


@pytest.mark.slow
def test_walk_every_list_of_large() -> None:
    with serve_simulator(sim_config(scale="large", seed=3)) as sim:
        counts = walk_everything(sim.base_url, sim.headers())
        visible = visible_issues(sim.world)
    assert counts["projects"] == 20
    assert counts["issues"] == visible > 35_000
    assert counts["scans"] > 15_000


def test_walk_every_list_of_medium() -> None:
    """The short form of the same walk: every list paged to its end, every item once."""
    with serve_simulator(sim_config(scale="medium", seed=3)) as sim:
        counts = walk_everything(sim.base_url, sim.headers())
        visible = visible_issues(sim.world)
    assert counts["projects"] == 8 and counts["scans"] > 2_000
    assert counts["issues"] == visible > 3_000
