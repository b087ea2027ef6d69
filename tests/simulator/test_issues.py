"""GET/PATCH /issues/{id}, fixes and rechecks."""

from __future__ import annotations

import httpx

from simulator.testing import Simulator

from .conftest import code


def visible_issue(sim: Simulator, status: str, kind: str = "domain") -> str:
    w = sim.world
    for tid in sim.target_ids(kind=kind, verified=True):
        for iid in w.targets[tid].issue_ids:
            if w.issues[iid].status == status:
                return iid
    raise AssertionError(f"no {status} issue")


def test_mark_and_undo(sim: Simulator, client: httpx.Client, make_client) -> None:
    iid = visible_issue(sim, "open")
    pid = sim.world.issues[iid].project_id
    open_before = client.get(f"/projects/{pid}").json()["open_issues"]
    r = client.patch(f"/issues/{iid}", json={"status": "false_positive", "reason": "Only test data lives here."})
    assert r.status_code == 200
    issue = r.json()
    assert issue["status"] == "false_positive" and issue["status_reason"] == "Only test data lives here."
    assert issue["marked_by"] == "ci-key"
    assert client.get(f"/projects/{pid}").json()["open_issues"] == open_before - 1
    assert client.get(f"/issues/{iid}").json() == issue
    r = client.patch(f"/issues/{iid}", json={"status": "open"})
    assert r.json()["status"] == "open" and r.json()["status_reason"] is None and r.json()["marked_by"] is None
    r = make_client("token_write").patch(f"/issues/{iid}", json={"status": "accepted_risk", "reason": "x" * 500})
    assert r.status_code == 200 and r.json()["marked_by"] == "agent:assistant"


def test_mark_errors(sim: Simulator, client: httpx.Client) -> None:
    iid = visible_issue(sim, "open")
    for body, status, expected, param in (
        ({"status": "false_positive"}, 400, "reason_required", None),
        ({"status": "accepted_risk", "reason": "too short"}, 400, "reason_required", None),
        ({"status": "accepted_risk", "reason": "x" * 501}, 400, "reason_required", None),
        ({"status": "fixed"}, 400, "parameter_invalid", "status"),
        ({}, 400, "parameter_invalid", "status"),
        ({"status": "open", "note": "x"}, 400, "parameter_invalid", "note"),
        ({"status": "false_positive", "reason": 12345678901}, 400, "parameter_invalid", "reason"),
    ):
        r = client.patch(f"/issues/{iid}", json=body)
        assert (r.status_code, code(r), r.json()["error"].get("param")) == (status, expected, param), body
    r = client.patch(f"/issues/{iid}", content=b"status=open", headers={"Content-Type": "application/json"})
    assert (r.status_code, code(r)) == (400, "body_invalid")
    fixed = visible_issue(sim, "fixed")
    r = client.patch(f"/issues/{fixed}", json={"status": "false_positive", "reason": "It was never a problem."})
    assert (r.status_code, code(r)) == (409, "issue_already_fixed")
    hidden_target = next(t for t in sim.target_ids(kind="domain", verified=False) if sim.world.targets[t].issue_ids)
    hidden = next(i for i in sim.world.targets[hidden_target].issue_ids if sim.world.issues[i].status == "open")
    r = client.patch(f"/issues/{hidden}", json={"status": "open"})
    assert (r.status_code, code(r)) == (409, "proof_required")
    r = client.patch("/issues/00000000-0000-4000-8000-000000000000", json={"status": "open"})
    assert (r.status_code, code(r)) == (404, "resource_not_found")
    # once proved, its issues are listed and can be marked
    sim.verify_target(hidden_target)
    assert client.patch(f"/issues/{hidden}", json={"status": "open"}).status_code == 200
    pid = sim.world.targets[hidden_target].project_id
    listed = client.get(f"/projects/{pid}/issues", params={"target_id": hidden_target, "limit": 100}).json()["data"]
    assert hidden in {i["id"] for i in listed}


def test_fix_unlock_and_read(sim: Simulator, client: httpx.Client) -> None:
    w = sim.world
    iid = next(i for i in (visible_issue(sim, "open"),) if not w.issues[i].fix_unlocked)
    r = client.get(f"/issues/{iid}/fix")
    assert (r.status_code, code(r)) == (404, "resource_not_found")
    fixes_used = client.get("/account").json()["quotas"]["fixes"]["used"]
    r = client.post(f"/issues/{iid}/fix")
    assert r.status_code == 201
    fix = r.json()
    assert fix["object"] == "fix" and fix["issue_id"] == iid and fix["steps"]
    assert client.get("/account").json()["quotas"]["fixes"]["used"] == fixes_used + 1
    assert client.post(f"/issues/{iid}/fix").status_code == 200  # already unlocked: free
    assert client.get("/account").json()["quotas"]["fixes"]["used"] == fixes_used + 1
    assert client.get(f"/issues/{iid}/fix").json() == fix
    assert client.get(f"/issues/{iid}").json()["fix_unlocked"] is True
    ws = w.workspaces[sim.workspace_id]
    with w.lock:
        ws.used["fixes"] = ws.quota_limit("fixes")
        ws.pack_fixes = 0
    other = next(i for t in sim.target_ids(verified=True) for i in w.targets[t].issue_ids
                 if not w.issues[i].fix_unlocked)
    r = client.post(f"/issues/{other}/fix")
    assert (r.status_code, code(r)) == (402, "fix_quota_exceeded") and "upgrade_url" in r.json()["error"]


def test_recheck_and_ceiling(sim: Simulator, client: httpx.Client) -> None:
    sim.world.config.recheck_limit = 3
    iid = visible_issue(sim, "open")
    r = client.post(f"/issues/{iid}/recheck")
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "recheck" and body["issue_id"] == iid and body["result"] in ("fixed", "still_present")
    assert body["issue"]["status"] == ("fixed" if body["result"] == "fixed" else "open")
    if body["result"] == "fixed":
        assert body["issue"]["fixed_at"] is not None
    assert client.post(f"/issues/{iid}/recheck", json={}).status_code == 200
    assert client.post(f"/issues/{iid}/recheck").status_code == 200
    r = client.post(f"/issues/{iid}/recheck")
    assert (r.status_code, code(r)) == (429, "recheck_limit_reached") and int(r.headers["Retry-After"]) > 0
    sim.advance(86400)
    assert client.post(f"/issues/{iid}/recheck").status_code == 200


def test_repository_recheck_starts_one_analysis_per_15_minutes(sim: Simulator, client: httpx.Client) -> None:
    iid = visible_issue(sim, "open", kind="repository")
    assert client.post(f"/issues/{iid}/recheck").json()["analysis_started"] is True
    assert client.post(f"/issues/{iid}/recheck").json()["analysis_started"] is False
    sim.advance(901)
    assert client.post(f"/issues/{iid}/recheck").json()["analysis_started"] is True


def test_recheck_and_fix_need_proof(sim: Simulator, client: httpx.Client) -> None:
    w = sim.world
    tid = next(t for t in sim.target_ids(kind="domain", verified=False) if w.targets[t].issue_ids)
    iid = w.targets[tid].issue_ids[0]
    for method, path in (("POST", "/recheck"), ("POST", "/fix"), ("GET", "/fix"), ("GET", "")):
        r = client.request(method, f"/issues/{iid}{path}")
        assert (r.status_code, code(r)) == (409, "proof_required"), path


def test_french_texts_and_errors(sim: Simulator, make_client) -> None:
    fr = make_client("pro_fr")
    iid = visible_issue(sim, "open")
    issue = fr.get(f"/issues/{iid}").json()
    en = make_client("pro").get(f"/issues/{iid}").json()
    assert issue["title"] != en["title"] and issue["detail"] != en["detail"]
    r = fr.patch(f"/issues/{iid}", json={"status": "false_positive"})
    assert "raison" in r.json()["error"]["message"]
    assert make_client("pro_fr").patch(
        f"/issues/{iid}", json={"status": "accepted_risk", "reason": "Risque accepté par l'équipe."}
    ).json()["marked_by"] == "cle-equipe-fr"
