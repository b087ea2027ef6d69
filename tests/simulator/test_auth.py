"""Credentials, scopes, the plan gate and workspace isolation."""

from __future__ import annotations

import httpx
import pytest

from simulator.routes import ROUTES
from simulator.testing import Simulator

from .conftest import code

ZERO = "00000000-0000-4000-8000-000000000000"


def concrete(path: str) -> str:
    for name in ("project_id", "target_id", "scan_id", "issue_id"):
        path = path.replace("{" + name + "}", ZERO)
    return path


def test_missing_and_wrong_credentials(shared_sim: Simulator) -> None:
    url = shared_sim.base_url + "/account"
    assert code(httpx.get(url)) == "authentication_required"
    assert httpx.get(url).status_code == 401
    assert code(httpx.get(url, headers={"Authorization": "Basic abc"})) == "authentication_required"
    assert code(httpx.get(url, headers={"Authorization": "Bearer rst_nope"})) == "invalid_api_key"
    assert code(httpx.get(url, headers=shared_sim.headers("revoked"))) == "invalid_api_key"
    r = httpx.get(url, headers={"Authorization": "Bearer rst_nope"})
    assert r.status_code == 401 and "X-RateLimit-Limit" not in r.headers


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_token_without_scope_gets_403(shared_sim: Simulator, route) -> None:
    r = httpx.request(route.method, shared_sim.base_url + concrete(route.path),
                      headers=shared_sim.headers("token_none"), json={} if route.method != "GET" else None)
    assert r.status_code == 403
    assert code(r) == "scope_missing"
    assert route.scope in r.json()["error"]["message"]


def test_scopes_per_route(shared_sim: Simulator) -> None:
    base = shared_sim.base_url
    pid = shared_sim.project_ids()[0]
    tid = shared_sim.target_ids(verified=True)[0]
    assert httpx.get(f"{base}/projects/{pid}", headers=shared_sim.headers("token_read")).status_code == 200
    r = httpx.post(f"{base}/projects", headers=shared_sim.headers("token_read"), json={"name": "x"})
    assert code(r) == "scope_missing"
    r = httpx.post(f"{base}/targets/{ZERO}/scans", headers=shared_sim.headers("token_run"), json={})
    assert code(r) == "resource_not_found"  # scope passed, object missing
    assert httpx.post(f"{base}/targets/{tid}/scans", headers=shared_sim.headers("token_run"), json={}).status_code in (
        200, 201)
    r = httpx.patch(f"{base}/issues/{ZERO}", headers=shared_sim.headers("token_run"), json={"status": "open"})
    assert code(r) == "scope_missing"
    r = httpx.patch(f"{base}/issues/{ZERO}", headers=shared_sim.headers("token_write"), json={"status": "open"})
    assert code(r) == "resource_not_found"


def test_plan_gate(sim: Simulator) -> None:
    url = sim.base_url + "/account"
    r = httpx.get(url, headers=sim.headers("free"))
    assert (r.status_code, code(r)) == (402, "api_plan_required")
    r = httpx.get(url, headers=sim.headers("trial_ended"))
    assert (r.status_code, code(r)) == (402, "api_trial_ended")
    assert "essai" in r.json()["error"]["message"]  # the French owner reads French
    r = httpx.get(url, headers=sim.headers("solo_trial"))
    assert r.status_code == 200
    account = r.json()
    assert account["plan"] == "solo" and account["api_access"]["allowed"] is True
    assert account["api_access"]["trial_ends_at"] is not None
    sim.advance(13 * 86400)
    assert httpx.get(url, headers=sim.headers("solo_trial")).status_code == 200
    sim.advance(1 * 86400 + 1)
    r = httpx.get(url, headers=sim.headers("solo_trial"))
    assert code(r) == "api_trial_ended"


def test_other_workspace_objects_are_404_like_missing(shared_sim: Simulator) -> None:
    base = shared_sim.base_url
    other = shared_sim.headers("other_workspace")
    pid = shared_sim.project_ids()[0]
    tid = shared_sim.target_ids()[0]
    w = shared_sim.world
    sid = w.targets[tid].scan_ids[-1]
    iid = next(i for t in shared_sim.target_ids(verified=True) for i in w.targets[t].issue_ids)
    for method, path in (("GET", f"/projects/{pid}"), ("GET", f"/projects/{pid}/scans"),
                         ("GET", f"/projects/{pid}/issues"), ("GET", f"/scans/{sid}"), ("GET", f"/issues/{iid}"),
                         ("POST", f"/targets/{tid}/scans"), ("POST", f"/projects/{pid}/targets"),
                         ("PATCH", f"/issues/{iid}"), ("GET", f"/issues/{iid}/fix"), ("POST", f"/issues/{iid}/fix"),
                         ("POST", f"/issues/{iid}/recheck")):
        body = {"url": "x.example.com"} if path.endswith("targets") else {"status": "open"} if method == "PATCH" else {}
        theirs = httpx.request(method, base + path, headers=other, json=body if method != "GET" else None)
        missing = httpx.request(method, base + path.replace(path.split("/")[2], ZERO), headers=other,
                                json=body if method != "GET" else None)
        assert theirs.status_code == missing.status_code == 404, (method, path)
        assert theirs.json() == missing.json()
    r = httpx.get(base + "/projects", headers=other)
    assert pid not in {p["id"] for p in r.json()["data"]}


def test_non_uuid_ids_and_unknown_routes(shared_sim: Simulator) -> None:
    h = shared_sim.headers()
    assert code(httpx.get(shared_sim.base_url + "/projects/not-a-uuid", headers=h)) == "resource_not_found"
    assert code(httpx.get(shared_sim.base_url + "/nothing", headers=h)) == "resource_not_found"
    assert code(httpx.delete(shared_sim.base_url + "/projects", headers=h)) == "resource_not_found"
