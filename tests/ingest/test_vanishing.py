"""Objects that vanish: a queued scan whose scan, target or project now answers 404 is settled (recorded gone)
and never polled again, by the sync or by the sensor; the sensor never fails tick after tick, one bad object
never blocks the others, and a scan status this version does not know is not polled forever."""

from __future__ import annotations

from typing import Any

import dagster as dg

from tests.ingest.conftest import Oracle, query, run_sync
from tests.reliability.proxy import rewriting_proxy

SCAN_ROUTE = "/v1/scans/{scan_id}"


def _queued_scan(sim, target_id: str, key: str) -> dict:
    oracle = Oracle(sim.base_url, sim.api_key)
    return oracle.http.post(f"/targets/{target_id}/scans", json={},
                            headers={"Idempotency-Key": key}).raise_for_status().json()


def _sensor(sim, db, base_url: str | None = None):
    from pipelines.defs.resources import HistoryResource, ScanningServiceResource
    from pipelines.defs.sensors import scan_finished_sensor

    resources = {"scanning_service": ScanningServiceResource(base_url=base_url or sim.base_url, api_key=sim.api_key),
                 "history": HistoryResource(database=str(db))}
    with dg.build_sensor_context(resources=resources, instance=dg.DagsterInstance.ephemeral()) as ctx:
        return scan_finished_sensor(ctx)


def _remove_scan(sim, scan_id: str) -> None:
    with sim.world.lock:
        sim.world.remove_scan(scan_id)


def test_a_vanished_scan_is_settled_and_never_polled_again_while_the_others_go_on(sim, env):
    sites = sim.target_ids(kind="domain", verified=True)
    gone = _queued_scan(sim, sites[0], "v-1")
    kept = _queued_scan(sim, sites[1], "v-2")
    assert run_sync().success  # both held as queued
    _remove_scan(sim, gone["id"])
    sim.advance(3600)  # the other one finishes

    (request,) = _sensor(sim, env)  # one 404 does not fail the tick, the finished scan still asks for its refresh
    assert isinstance(request, dg.RunRequest) and request.partition_key == "default"
    assert request.run_config["ops"]["issues"]["config"]["project_ids"] == [kept_project(sim, kept)]

    assert run_sync().success
    assert query(env, f"SELECT answered FROM scans_gone WHERE scan_id = '{gone['id']}'") == [("scan",)]
    assert query(env, f"SELECT status FROM scans WHERE id = '{gone['id']}'") == [("queued",)]  # history kept
    assert query(env, f"SELECT status FROM scans WHERE id = '{kept['id']}'")[0][0] in ("done", "failed")

    polls = sim.request_count(route=SCAN_ROUTE)
    for _ in range(2):
        assert run_sync().success
        skipped = _sensor(sim, env)
        assert isinstance(skipped, dg.SkipReason)
    assert sim.request_count(route=SCAN_ROUTE) == polls


def kept_project(sim, scan: dict) -> str:
    return sim.world.targets[scan["target_id"]].project_id


def test_queued_scans_of_a_removed_target_or_project_are_settled_without_a_request(sim, env):
    sites = sim.target_ids(kind="domain", verified=True)
    by_target = _queued_scan(sim, sites[0], "v-3")
    project = sim.world.targets[sites[1]].project_id
    other_target = next(t for t in sites if sim.world.targets[t].project_id != project and t != sites[0])
    if sim.world.targets[sites[0]].project_id == project:
        by_target = _queued_scan(sim, other_target, "v-5")
    by_project = _queued_scan(sim, sites[1], "v-4")
    assert run_sync().success
    sim.remove_target(by_target["target_id"])
    sim.delete_project(project)
    polls = sim.request_count(route=SCAN_ROUTE)
    assert run_sync().success
    assert sim.request_count(route=SCAN_ROUTE) == polls
    answered = dict(query(env, "SELECT scan_id, answered FROM scans_gone"))
    assert answered.get(by_target["id"]) == "target" and answered.get(by_project["id"]) == "project"
    assert isinstance(_sensor(sim, env), dg.SkipReason)
    assert sim.request_count(route=SCAN_ROUTE) == polls


def test_the_sensor_does_not_poll_a_status_this_version_does_not_know(sim, env, monkeypatch):
    site = sim.target_ids(kind="domain", verified=True)[0]
    scan = _queued_scan(sim, site, "v-6")

    def cancel(path: str, body: Any) -> Any:
        items = body.get("data") if path.endswith("/scans") else [body] if "/scans/" in path else []
        for s in items or []:
            if s.get("object") == "scan" and s["id"] == scan["id"]:
                s["status"] = "cancelled"
        return body

    with rewriting_proxy(sim.base_url, cancel) as proxied:
        monkeypatch.setenv("SCANWATCH_BASE_URL", proxied)
        assert run_sync().success
        assert query(env, f"SELECT status FROM scans WHERE id = '{scan['id']}'") == [("cancelled",)]
        polls = sim.request_count(route=SCAN_ROUTE)
        for _ in range(3):
            assert isinstance(_sensor(sim, env, proxied), dg.SkipReason)
        assert sim.request_count(route=SCAN_ROUTE) == polls


def test_the_sensor_says_why_in_one_line_when_the_service_refuses_and_never_raises(sim, env):
    site = sim.target_ids(kind="domain", verified=True)[0]
    _queued_scan(sim, site, "v-7")
    assert run_sync().success
    from pipelines.defs.resources import HistoryResource, ScanningServiceResource
    from pipelines.defs.sensors import scan_finished_sensor

    resources = {"scanning_service": ScanningServiceResource(base_url=sim.base_url, api_key="rst_revoked_or_wrong"),
                 "history": HistoryResource(database=str(env))}
    for _ in range(2):
        with dg.build_sensor_context(resources=resources, instance=dg.DagsterInstance.ephemeral()) as ctx:
            skipped = scan_finished_sensor(ctx)
        assert isinstance(skipped, dg.SkipReason) and "401" in skipped.skip_message
        assert "rst_revoked_or_wrong" not in skipped.skip_message


def test_scheduled_scans_do_not_wait_on_a_status_this_version_does_not_know(sim, env, monkeypatch):
    from pipelines.defs.resources import HistoryResource, ScanningServiceResource
    from pipelines.defs.scheduled_scans import scheduled_scans_job

    assert run_sync().success
    site = sim.target_ids(kind="domain", verified=True)[0]

    def cancel(path: str, body: Any) -> Any:
        if isinstance(body, dict) and body.get("object") == "scan":
            body["status"] = "cancelled"
        return body

    with rewriting_proxy(sim.base_url, cancel) as proxied:
        polls = sim.request_count(route=SCAN_ROUTE)
        result = scheduled_scans_job.execute_in_process(
            run_config={"ops": {"start_and_wait_for_scans": {"config": {
                "target_ids": [site], "tick": "20261124T0300", "quota_reserve": 0, "poll_seconds": 0.05,
                "timeout_seconds": 3.0}}}},
            resources={"scanning_service": ScanningServiceResource(base_url=proxied, api_key=sim.api_key),
                       "history": HistoryResource(database=str(env))})
    assert result.success
    assert sim.request_count(route=SCAN_ROUTE) == polls
