"""Where the contract is loose, the simulator serves each reading a real service may take, over HTTP."""

from __future__ import annotations

import httpx
import pytest

from simulator.testing import Simulator
from tests.simulator.conftest import code


def _failing_scan(sim: Simulator, client: httpx.Client, target: str) -> dict:
    """Start scans of `target` until one is due to fail, and let it finish."""
    for _ in range(200):
        scan = client.post(f"/targets/{target}/scans", json={}).raise_for_status().json()
        with sim.world.lock:
            will_fail = sim.world.scans[scan["id"]].will_fail
        sim.advance(60)
        if will_fail:
            return client.get(f"/scans/{scan['id']}").json()
        sim.advance(3600)  # past the hour in which a done scan is reused
    raise AssertionError("no failing scan in 200")


def _failed_scan_under(sim: Simulator, client: httpx.Client, **reading: bool) -> tuple[str, dict]:
    """Under that reading, with quota to spare: a proved site and its latest scan, which failed."""
    sim.set_readings(**reading)
    sim.set_usage(quick_scans=0, pack_scans=500)
    target = sim.target_ids(kind="domain", verified=True)[0]
    scan = _failing_scan(sim, client, target)
    assert scan["status"] == "failed"
    return target, scan


@pytest.mark.parametrize("moves", [False, True])
def test_a_failed_scan_moves_last_scan_at_only_under_that_reading(sim, client, moves):
    target, scan = _failed_scan_under(sim, client, failed_scan_moves_last_scan=moves)
    last = next(t["last_scan_at"] for p in client.get("/projects", params={"limit": 100}).json()["data"]
                for t in p["targets"] if t["id"] == target)
    assert (last == scan["finished_at"]) is moves


@pytest.mark.parametrize("reused", [False, True])
def test_a_failed_scan_counts_for_reuse_only_under_that_reading(sim, client, reused):
    target, failed = _failed_scan_under(sim, client, failed_scan_reused=reused)
    again = client.post(f"/targets/{target}/scans", json={})
    assert (again.status_code, again.json()["id"] == failed["id"], again.json()["reused"]) == (
        (200, True, True) if reused else (201, False, False))


@pytest.mark.parametrize("direct", [True, False])
def test_a_mark_switches_directly_only_under_that_reading(sim, client, direct):
    sim.set_readings(marks_switch_directly=direct)
    project = sim.project_ids()[0]
    issue = next(i for i in client.get(f"/projects/{project}/issues", params={"status": "open"}).json()["data"])
    reason = {"reason": "checked by the team, not reachable"}
    client.patch(f"/issues/{issue['id']}", json={"status": "false_positive", **reason}).raise_for_status()
    r = client.patch(f"/issues/{issue['id']}", json={"status": "accepted_risk", **reason})
    if direct:
        assert r.status_code == 200 and r.json()["status"] == "accepted_risk"
    else:
        assert r.status_code == 400 and code(r) == "parameter_invalid" and r.json()["error"]["param"] == "status"


@pytest.mark.parametrize("replay_errors", [False, True])
def test_an_idempotent_replay_of_an_error_only_under_that_reading(sim, client, replay_errors):
    sim.set_readings(replay_errors=replay_errors)
    target = sim.target_ids(kind="domain", verified=True)[0]
    sim.set_usage(quick_scans=10**6, pack_scans=0)
    headers = {"Idempotency-Key": "reading-replay-1"}
    first = client.post(f"/targets/{target}/scans", json={}, headers=headers)
    assert first.status_code == 402 and code(first) == "scan_quota_exceeded"
    sim.set_usage(quick_scans=0)
    second = client.post(f"/targets/{target}/scans", json={}, headers=headers)
    if replay_errors:
        assert second.status_code == 402 and second.headers.get("Idempotent-Replayed") == "true"
    else:
        assert second.status_code == 201


def test_readings_are_set_over_http_and_checked(sim):
    url = sim.root_url + "/_sim/readings"
    assert httpx.get(url).json()["failed_scan_moves_last_scan"] is False
    assert httpx.post(url, json={"failed_scan_moves_last_scan": True}).json()["failed_scan_moves_last_scan"] is True
    bad = httpx.post(url, json={"no_such_reading": True})
    assert bad.status_code == 400 and "no_such_reading" in bad.json()["error"]
