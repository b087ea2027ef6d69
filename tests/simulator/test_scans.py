"""POST /targets/{id}/scans, GET /scans/{id}: lifecycle, reuse, quotas, audits, repositories."""

from __future__ import annotations

import httpx

from simulator.testing import Simulator

from .conftest import code


def quiet_target(sim: Simulator, **kw: object) -> str:
    """A target with no scan in the last two hours, so a POST starts a real scan."""
    w = sim.world
    for tid in sim.target_ids(**kw):
        t = w.targets[tid]
        if not t.scan_ids or w.scans[t.scan_ids[-1]].created_at < w.now() - 7200:
            return tid
    raise AssertionError("no quiet target")


def test_scan_lifecycle_and_reuse(sim: Simulator, client: httpx.Client) -> None:
    tid = quiet_target(sim, kind="domain", verified=True)
    used = client.get("/account").json()["quotas"]["quick_scans"]["used"]
    r = client.post(f"/targets/{tid}/scans", json={})
    assert r.status_code == 201
    scan = r.json()
    assert scan["status"] == "queued" and scan["kind"] == "quick" and scan["reused"] is False
    assert scan["score"] is None and scan["coverage"] is None and scan["finished_at"] is None
    assert scan["next_real_scan_at"] is None and scan["audit_fallback"] is False
    assert client.get("/account").json()["quotas"]["quick_scans"]["used"] == used + 1
    # running: the same scan comes back, nothing counted, whatever the kind
    again = client.post(f"/targets/{tid}/scans", json={"kind": "audit"})
    assert again.status_code == 200 and again.json()["id"] == scan["id"] and again.json()["reused"] is True
    assert again.json()["next_real_scan_at"] is not None
    assert client.get("/account").json()["quotas"]["quick_scans"]["used"] == used + 1
    sim.advance(31)
    done = client.get(f"/scans/{scan['id']}").json()
    assert done["status"] in ("done", "failed") and done["finished_at"] and done["reused"] is False
    if done["status"] == "done":
        assert isinstance(done["score"], int) and done["grade"] and 0 <= done["coverage"] <= 1
        target = next(t for p in client.get("/projects").json()["data"] for t in p["targets"] if t["id"] == tid)
        assert target["score"] == done["score"] and target["last_scan_at"] == done["finished_at"]
        # same kind finished within the hour: reused, with the hour's end as next real scan
        r = client.post(f"/targets/{tid}/scans")
        assert r.status_code == 200 and r.json()["id"] == scan["id"] and r.json()["reused"] is True
        # another kind is a new scan
        assert client.post(f"/targets/{tid}/scans", json={"kind": "audit"}).status_code == 201
        sim.advance(3600 + 31)
        assert client.post(f"/targets/{tid}/scans", json={"kind": "quick"}).status_code == 201
    assert client.get(f"/projects/{sim.world.targets[tid].project_id}/scans").json()["data"][0]["target_id"] == tid


def test_scan_errors(sim: Simulator, client: httpx.Client) -> None:
    w = sim.world
    repo = sim.target_ids(kind="repository")[0]
    site = quiet_target(sim, kind="domain", verified=True)
    unproved = sim.target_ids(kind="domain", verified=False)[0]
    for tid, body, status, expected in (
        (repo, {"kind": "quick"}, 400, "target_kind_invalid"),
        (site, {"kind": "repository"}, 400, "target_kind_invalid"),
        (site, {"kind": "deep"}, 400, "parameter_invalid"),
        (site, {"kind": "quick", "depth": 3}, 400, "parameter_invalid"),
        (unproved, {"kind": "audit"}, 409, "proof_required"),
        ("00000000-0000-4000-8000-000000000000", {}, 404, "resource_not_found"),
    ):
        r = client.post(f"/targets/{tid}/scans", json=body)
        assert (r.status_code, code(r)) == (status, expected), body
    assert code(client.post(f"/targets/{site}/scans", content=b"{", headers={"Content-Type": "application/json"})) \
        == "body_invalid"
    r = client.post(f"/targets/{unproved}/scans")  # quick scans run on unproved sites
    assert r.status_code == 201
    with w.lock:  # a site excluded after it was added
        excluded = w.add_target(w.projects[w.targets[site].project_id], "domain", "excluded.example.com",
                                verified=True, created_at=w.now())
    r = client.post(f"/targets/{excluded.id}/scans")
    assert (r.status_code, code(r)) == (409, "site_excluded")
    sim.pause_project(w.targets[site].project_id)
    assert code(client.post(f"/targets/{site}/scans")) == "project_paused"


def test_quota_then_pack_credits_then_402(sim: Simulator, client: httpx.Client) -> None:
    w = sim.world
    ws = w.workspaces[sim.workspace_id]
    sim.set_usage(quick_scans=ws.quota_limit("quick_scans"), audits=ws.quota_limit("audits"), pack_scans=1)
    a, b = sim.target_ids(kind="domain", verified=True)[:2]
    for tid in (a, b):
        with w.lock:
            t = w.targets[tid]
            t.scan_ids = [s for s in t.scan_ids if w.scans[s].created_at < w.now() - 7200]
    assert client.post(f"/targets/{a}/scans").status_code == 201
    assert client.get("/account").json()["pack_credits"]["scans"] == 0
    r = client.post(f"/targets/{b}/scans")
    assert (r.status_code, code(r)) == (402, "scan_quota_exceeded")
    assert r.json()["error"]["upgrade_url"].startswith("https://")
    r = client.post(f"/targets/{b}/scans", json={"kind": "audit"})
    assert (r.status_code, code(r)) == (402, "audit_quota_exceeded") and "upgrade_url" in r.json()["error"]
    # a repository analysis is not counted
    repo = sim.target_ids(kind="repository")[0]
    sim.advance(7200)
    assert client.post(f"/targets/{repo}/scans").status_code == 201


def test_audit_fallback(sim: Simulator, client: httpx.Client) -> None:
    tid = quiet_target(sim, kind="domain", verified=True)
    sim.verify_target(tid, verified=True, proof_holds=False)
    audits = client.get("/account").json()["quotas"]["audits"]["used"]
    r = client.post(f"/targets/{tid}/scans", json={"kind": "audit"})
    assert r.status_code == 201
    assert r.json()["audit_fallback"] is True and r.json()["kind"] == "quick"
    assert client.get("/account").json()["quotas"]["audits"]["used"] == audits


def test_plans_without_audits_or_repositories(sim: Simulator, monkeypatch) -> None:
    from simulator.model import PLANS

    w = sim.world
    h = sim.headers("solo_trial")
    pid = sim.project_ids("solo_trial")[0]
    site = w.projects[pid].target_ids[0]
    with w.lock:  # repositories are connected in the application, not through the API
        repo = w.add_target(w.projects[pid], "repository", "solo/app", verified=True, created_at=w.now())
    r = httpx.post(f"{sim.base_url}/targets/{repo.id}/scans", headers=h, json={})
    assert (r.status_code, code(r)) == (402, "repositories_not_in_plan")
    monkeypatch.setitem(PLANS["solo"], "features", dict(PLANS["solo"]["features"], full_audit=False))
    r = httpx.post(f"{sim.base_url}/targets/{site}/scans", headers=h, json={"kind": "audit"})
    assert (r.status_code, code(r)) == (402, "audit_not_in_plan")


def test_repository_ceiling_and_host(sim: Simulator, client: httpx.Client) -> None:
    sim.world.config.repository_analyses_per_day = 1
    repo = sim.target_ids(kind="repository")[0]
    sim.advance(7200)
    first = client.post(f"/targets/{repo}/scans")
    assert first.status_code == 201 and first.json()["kind"] == "repository"
    sim.advance(3600 + 60)
    r = client.post(f"/targets/{repo}/scans")
    assert (r.status_code, code(r)) == (429, "repository_analyses_limit_reached")
    assert int(r.headers["Retry-After"]) > 0
    sim.set_faults(repository_host_down=True)
    r = client.post(f"/targets/{repo}/scans")
    assert (r.status_code, code(r)) == (409, "repository_host_unavailable")


def test_running_status_option(sim: Simulator, client: httpx.Client) -> None:
    sim.rt.config.running_status = "running"
    tid = quiet_target(sim, kind="domain", verified=True)
    scan = client.post(f"/targets/{tid}/scans").json()
    assert scan["status"] == "queued"
    sim.advance(20)
    assert client.get(f"/scans/{scan['id']}").json()["status"] == "running"
    sim.advance(20)
    assert client.get(f"/scans/{scan['id']}").json()["status"] in ("done", "failed")
