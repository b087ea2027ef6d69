"""Injected faults: each one on its own, deterministic, scoped to list routes when asked."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from simulator.testing import Simulator

from .conftest import code


def statuses(c: httpx.Client, path: str, n: int) -> list[int]:
    return [c.get(path).status_code for _ in range(n)]


def test_faults_are_off_by_default(client: httpx.Client) -> None:
    assert set(statuses(client, "/projects", 30)) == {200}


def test_error_faults(sim: Simulator, client: httpx.Client) -> None:
    for fault, status, expected in (("error_rate", 500, "internal_error"),
                                    ("unavailable_rate", 503, "service_unavailable")):
        sim.set_faults(**{fault: 1.0})
        r = client.get("/account")
        assert (r.status_code, code(r)) == (status, expected)
        sim.clear_faults()
    sim.set_faults(busy_rate=1.0)
    assert client.get("/account").status_code == 200  # platform_busy concerns scan starts
    tid = sim.target_ids(verified=True)[0]
    r = client.post(f"/targets/{tid}/scans")
    assert (r.status_code, code(r)) == (503, "platform_busy")


def test_rate_limit_bursts(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults(rate_limit_rate=1.0, rate_limit_burst=3)
    r = client.get("/account")
    assert (r.status_code, code(r)) == (429, "rate_limited") and r.headers["Retry-After"] == "1"
    sim.set_faults(rate_limit_rate=0.0)
    assert statuses(client, "/account", 3) == [200, 200, 200]  # re-setting faults ends the burst
    sim.set_faults(rate_limit_rate=0.2, rate_limit_burst=4)
    got = statuses(client, "/account", 60)
    runs = "".join("x" if s == 429 else "." for s in got).split(".")
    assert any(len(run) >= 4 for run in runs)


def test_fault_draws_are_deterministic(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults(error_rate=0.3)
    first = statuses(client, "/account", 40)
    sim.set_faults(error_rate=0.3)  # re-seeded
    assert statuses(client, "/account", 40) == first
    assert 500 in first and 200 in first


def test_latency(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults(latency_ms=150, jitter_ms=50)
    t = time.perf_counter()
    client.get("/account")
    assert time.perf_counter() - t >= 0.15  # the injected latency was served (no upper bound: a busy host)


def test_malformed_and_truncated_bodies(sim: Simulator, client: httpx.Client) -> None:
    for fault in ("malformed_rate", "truncated_rate"):
        sim.set_faults(**{fault: 1.0})
        r = client.get("/projects")
        assert r.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(r.content)
        sim.clear_faults()
    assert client.get("/projects").json()["object"] == "list"


def test_dropped_connection(sim: Simulator) -> None:
    sim.set_faults(drop_rate=1.0)
    with pytest.raises(httpx.TransportError):
        httpx.get(sim.base_url + "/account", headers=sim.headers(), timeout=5)
    sim.clear_faults()
    assert httpx.get(sim.base_url + "/account", headers=sim.headers()).status_code == 200


def test_scope_lists(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults(error_rate=1.0, scope="lists")
    pid = sim.project_ids()[0]
    assert client.get("/account").status_code == 200
    assert client.get(f"/projects/{pid}").status_code == 200
    for path in ("/projects", f"/projects/{pid}/scans", f"/projects/{pid}/issues"):
        assert client.get(path).status_code == 500


def test_future_enum_values(sim: Simulator, client: httpx.Client) -> None:
    pid = sim.project_ids()[0]
    sim.set_faults(future_enum_rate=0.5)
    data = client.get(f"/projects/{pid}/issues", params={"limit": 100}).json()["data"]
    seen = {(k, i[k]) for i in data for k in ("family", "status", "severity")}
    assert {("family", "supplyChain"), ("status", "in_review"), ("severity", "unknown")} <= seen
    again = client.get(f"/projects/{pid}/issues", params={"limit": 100}).json()["data"]
    assert again == data  # stable per issue
    odd = next(i for i in data if "unknown" in (i["severity"],) or i["status"] == "in_review")
    assert client.get(f"/issues/{odd['id']}").json() == odd


def test_list_changes_while_paging_insert(sim: Simulator, client: httpx.Client) -> None:
    pid = sim.project_ids()[0]
    before = len(sim.world.issues)
    sim.set_faults(list_mutation_rate=1.0, list_mutation="insert", scope="lists")
    page = client.get(f"/projects/{pid}/issues", params={"limit": 10}).json()
    assert len(sim.world.issues) == before + 1
    nxt = client.get(f"/projects/{pid}/issues", params={"limit": 10, "starting_after": page["data"][-1]["id"]})
    assert nxt.status_code == 200


@pytest.mark.parametrize("kind", ["scans", "issues"])
def test_list_changes_while_paging_remove(sim: Simulator, client: httpx.Client, kind: str) -> None:
    pid = sim.project_ids()[0]
    sim.set_faults(list_mutation_rate=1.0, list_mutation="remove", scope="lists")
    page = client.get(f"/projects/{pid}/{kind}", params={"limit": 5}).json()
    assert page["has_more"]
    r = client.get(f"/projects/{pid}/{kind}", params={"limit": 5, "starting_after": page["data"][-1]["id"]})
    assert (r.status_code, code(r)) == (400, "cursor_invalid")
    sim.clear_faults()
    # a client recovers by starting over
    assert client.get(f"/projects/{pid}/{kind}", params={"limit": 5}).status_code == 200


def test_unexpected_error_is_an_enveloped_500(sim: Simulator, client: httpx.Client, monkeypatch) -> None:
    from simulator import views

    def boom(*a: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(views, "account", boom)
    r = client.get("/account")
    assert (r.status_code, code(r)) == (500, "internal_error")
