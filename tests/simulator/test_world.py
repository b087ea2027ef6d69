"""Determinism of the world and of its evolution, and the shape of each scale."""

from __future__ import annotations

import httpx

from simulator.clock import iso, make_clock
from simulator.config import SimConfig
from simulator.generator import build_world
from simulator.testing import Simulator, serve_simulator

from .conftest import sim_config


def snapshot(sim: Simulator) -> dict:
    """Everything a client can list, through HTTP."""
    out: dict = {}
    with httpx.Client(base_url=sim.base_url, headers=sim.headers(), timeout=10) as c:
        out["account"] = c.get("/account").json()
        out["projects"] = c.get("/projects", params={"limit": 100}).json()
        for p in out["projects"]["data"]:
            for kind in ("scans", "issues"):
                items, cursor = [], None
                while True:
                    q = {"limit": 100, **({"starting_after": cursor} if cursor else {})}
                    page = c.get(f"/projects/{p['id']}/{kind}", params=q).json()
                    items += page["data"]
                    if not page["has_more"]:
                        break
                    cursor = items[-1]["id"]
                out[f"{p['id']}/{kind}"] = items
    return out


def test_same_seed_same_world_and_same_evolution() -> None:
    results = []
    for _ in range(2):
        with serve_simulator(sim_config(seed=11)) as sim:
            first = snapshot(sim)
            rounds = [sim.run_round(), sim.run_round(0.5)]
            sim.advance(7200)
            results.append((first, rounds, snapshot(sim), dict(sim.keys)))
    assert results[0] == results[1]
    with serve_simulator(sim_config(seed=12)) as sim:
        assert snapshot(sim)["projects"] != results[0][0]["projects"]
        assert dict(sim.keys) != results[0][3]


def test_round_evolves_issues_in_every_way(sim: Simulator) -> None:
    w = sim.world
    before = {i: (x.status, x.severity, x.last_seen_at) for i, x in w.issues.items()}
    sim.advance(3600)
    summary = sim.run_round()
    assert summary["scans"] == len(sim.target_ids()) and summary["done"] + summary["failed"] == summary["scans"]
    for kind in ("new", "fixed", "reopened", "severity_changed"):
        assert summary[kind] == len(summary[f"{kind}_ids"]) >= 1, kind
    for iid in summary["new_ids"]:
        assert iid not in before and w.issues[iid].status == "open"
    for iid in summary["fixed_ids"]:
        assert before[iid][0] == "open" and w.issues[iid].status == "fixed" and w.issues[iid].fixed_at == w.now()
    for iid in summary["reopened_ids"]:  # a regression keeps the id
        assert before[iid][0] == "fixed" and w.issues[iid].status == "open" and w.issues[iid].fixed_at is None
        assert w.issues[iid].last_seen_at == w.now()
    for iid in summary["severity_changed_ids"]:
        assert w.issues[iid].severity != before[iid][1]
    visible = {t for t in sim.target_ids() if w.target_visible(w.targets[t])}
    for kind in ("new_ids", "fixed_ids", "reopened_ids", "severity_changed_ids"):
        assert any(w.issues[i].target_id in visible for i in summary[kind])
    with httpx.Client(base_url=sim.base_url, headers=sim.headers()) as c:
        for project in c.get("/projects").json()["data"]:
            assert project["last_scan_at"] == iso(w.now())
            assert project["open_issues"] == sum(w.targets[t["id"]].open_issues for t in project["targets"]
                                                 if t["hidden_issues"] is None)


def test_partial_rounds_are_deterministic(sim: Simulator) -> None:
    a = sim.run_round(0.25)
    assert 1 <= a["scans"] <= 3


def test_api_scans_finish_on_the_driven_clock(sim: Simulator) -> None:
    w = sim.world
    tid = next(t for t in sim.target_ids(kind="domain", verified=True)
               if w.scans[w.targets[t].scan_ids[-1]].created_at < w.now() - 7200)
    with httpx.Client(base_url=sim.base_url, headers=sim.headers()) as c:
        sid = c.post(f"/targets/{tid}/scans").json()["id"]
        sim.advance(29)
        assert c.get(f"/scans/{sid}").json()["status"] == "queued"
        sim.advance(1)
        scan = c.get(f"/scans/{sid}").json()
    assert scan["status"] in ("done", "failed")
    assert scan["finished_at"] == "2026-11-20T09:00:30.000Z"


def test_scales() -> None:
    small = build_world(SimConfig(scale="small"), make_clock("driven"))
    main = small.workspaces[small.main_workspace_id]
    assert len(main.project_ids) == 3
    targets = [t for p in main.project_ids for t in small.projects[p].target_ids]
    assert len(targets) == 8
    assert 200 <= sum(len(small.targets[t].issue_ids) for t in targets) <= 600
    large = build_world(SimConfig(scale="large", seed=3), make_clock("driven"))
    main = large.workspaces[large.main_workspace_id]
    assert len(main.project_ids) == 20
    targets = [t for p in main.project_ids for t in large.projects[p].target_ids]
    assert len(targets) == 200
    assert 40_000 <= sum(len(large.targets[t].issue_ids) for t in targets) <= 60_000
    assert 16_000 <= sum(len(large.targets[t].scan_ids) for t in targets) <= 24_000
    real = build_world(SimConfig(scale="small", seed=3, clock="real"), make_clock("real"))
    assert sorted(real.issues) == sorted(build_world(SimConfig(scale="small", seed=3), make_clock("driven")).issues)


def test_each_pro_workspace_scans_its_own_addresses() -> None:
    """A second Pro workspace is shaped like the main one but owns its sites: none of its targets carries an
    address of another workspace (it used to repeat `shop.acme-demo.com` and the rest)."""
    for scale in ("small", "medium"):
        world = build_world(SimConfig(scale=scale, pro_workspaces=3), make_clock("driven"))
        addresses = {}
        for ws_id in world.pro_workspace_ids:
            ws = world.workspaces[ws_id]
            addresses[ws.name] = {world.targets[t].address for p in ws.project_ids
                                  for t in world.projects[p].target_ids}
        others = world.pro_workspace_ids[1:]
        for n, ws_id in enumerate(others, start=2):
            own = addresses[world.workspaces[ws_id].name]
            assert own and all(f"pro{n}" in a for a in own), (scale, sorted(own)[:3])
        names = list(addresses)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                assert not addresses[a] & addresses[b], (scale, a, b, sorted(addresses[a] & addresses[b])[:3])
