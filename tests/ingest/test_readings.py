"""The product under each reading of a loose rule the simulator serves (docs/simulator.md, `SimConfig.readings`).

Each test runs real scanwatch syncs (and scheduled scans) over HTTP under both readings of one rule, into a
history on each engine (`engine_db`: a DuckDB file, a real PostgreSQL database), and asserts what the history
and the metrics (read where each engine keeps its snapshot) must show whichever reading the service takes.
The reading of `failed_scan_moves_last_scan` is covered in test_failed_scans.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.ingest.conftest import Oracle, exposition, query, run_sync
from tests.ingest.scheduled import read_account, run_scheduled, synced_world

REASON = "checked by the team, not reachable"


def _metric(db: Path | str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` carrying these labels, as the exporter serves the last snapshot."""
    text = exposition(db)
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def _service_scans(sim, project_id: str) -> dict[str, tuple[str, str, str]]:
    """The project's scans as the service lists them: id -> (target, kind, status)."""
    scans = Oracle(sim.base_url, sim.api_key).walk(f"/projects/{project_id}/scans")
    return {s["id"]: (s["target_id"], s["kind"], s["status"]) for s in scans}


@pytest.mark.parametrize("reused", [False, True], ids=["failed-scan-retried", "failed-scan-reused"])
def test_a_scheduled_scan_after_a_failure_is_recorded_once_under_either_reuse_reading(
        tmp_path, monkeypatch, engine_db, reused):
    """Contract, scan reuse: "a scan of the same kind finished within the hour" is returned instead of a new
    one; whether a failed scan counts as finished for this is loose. Either way the history holds each scan
    of the service once, a reused answer charges nothing, and a failure is counted once."""
    with synced_world(tmp_path, monkeypatch, engine_db, scan_failure_rate=1.0,
                      readings={"failed_scan_reused": reused}) as (sim, db):
        site = sim.target_ids(kind="domain", verified=True)[0]
        project = sim.world.targets[site].project_id
        sim.set_usage(quick_scans=0, pack_scans=0)
        initial = _service_scans(sim, project)
        first = run_scheduled(sim, db, [site], tick="20261124T0300")
        assert (first["started"], first["failed"], first["reused"]) == (1, 1, 0)
        used = read_account(sim)["quotas"]["quick_scans"]["used"]

        again = run_scheduled(sim, db, [site], tick="20261124T0310")  # another tick within the hour
        assert again["reused"] == int(reused)
        assert read_account(sim)["quotas"]["quick_scans"]["used"] == used + (0 if reused else 1)
        assert run_sync(full_reconcile=True).success

        service = _service_scans(sim, project)
        stored = query(db, f"SELECT id, target_id, kind, status FROM scans WHERE project_id = '{project}'")
        assert {i: rest for i, *rest in stored} == {i: list(v) for i, v in service.items()}  # each scan once
        assert len(stored) == len(service)
        assert sum(1 for t, _, status in service.values() if t == site and status == "failed") == (
            1 if reused else 2) + sum(1 for (t, _, status) in initial.values() if t == site and status == "failed")
        assert _metric(db, "secscan_scans_total", project_id=project, kind="quick", status="failed") == sum(
            1 for _, kind, status in service.values() if kind == "quick" and status == "failed")
        assert _metric(db, "secscan_target_last_scan_failed", target_id=site) == 1


@pytest.mark.parametrize("direct", [True, False], ids=["marks-switch-directly", "marks-switch-through-open"])
def test_a_mark_switched_from_false_positive_to_accepted_risk_under_either_reading(sim, engine_env, direct):
    """Contract, issue status: from `false_positive` or `accepted_risk` only an undo to `open` is listed; whether
    one mark may replace the other directly is loose. A user switches two critical issues' marks the way the
    service allows (through `open`, a sync sees the second one's undo); the history keeps each status a sync
    saw, an undo is never a regression, and both end marked, out of the open count and off the page.

    Mutation that fails both PostgreSQL cases (the DuckDB ones pass): the PostgreSQL engine's `row_hash` a
    constant (`CAST(0 AS BIGINT)`), so the unchanged test finds every issue unchanged and no mark is stored."""
    env = engine_env
    sim.set_readings(marks_switch_directly=direct)
    oracle = Oracle(sim.base_url, sim.api_key)
    issues = [i for i in oracle.state().all_issues() if i["status"] == "open" and i["severity"] == "critical"][:2]
    ids, projects = [i["id"] for i in issues], {i["project_id"] for i in issues}

    def mark(iid: str, status: str, reason: str = REASON) -> None:
        body = {"status": status, **({"reason": reason} if status != "open" else {})}
        oracle.http.patch(f"/issues/{iid}", json=body).raise_for_status()

    def metric(name: str) -> float:
        return sum(_metric(env, name, project_id=p, severity="critical") for p in projects)

    assert run_sync().success
    for iid in ids:
        mark(iid, "false_positive")
    assert run_sync().success
    dismissed = metric("secscan_issues_dismissed_total")
    if direct:
        for iid in ids:
            mark(iid, "accepted_risk", REASON + ".")
    else:
        for iid in ids:
            mark(iid, "open")
        mark(ids[0], "accepted_risk", REASON + ".")
        assert run_sync().success  # sees the second issue's undo
        assert query(env, f"SELECT status FROM issues WHERE id = '{ids[1]}'") == [("open",)]
        mark(ids[1], "accepted_risk", REASON + ".")
    assert run_sync().success

    assert query(env, "SELECT DISTINCT status, status_reason FROM issues WHERE id IN ('" + "','".join(ids) + "')") \
        == [("accepted_risk", REASON + ".")]
    seen_undo = [] if direct else [ids[1]]
    for iid in ids:
        events = query(env, f"SELECT event, from_value, to_value FROM issue_events WHERE issue_id = '{iid}' "
                            "AND event <> 'opened' ORDER BY observed_at, to_value")
        steps = [("open", "false_positive"), ("false_positive", "open"), ("open", "accepted_risk")] \
            if iid in seen_undo else [("open", "false_positive"), ("false_positive", "accepted_risk")]
        assert events == [("status_changed", old, new) for old, new in steps]
        assert not _metric(env, "secscan_critical_issue_new", issue_id=iid)
    assert metric("secscan_issues_reopened_total") == 0
    assert metric("secscan_issues_dismissed_total") == dismissed + 2
    open_now = sum(1 for i in oracle.state().all_issues()
                   if i["project_id"] in projects and i["severity"] == "critical" and i["status"] == "open")
    assert metric("secscan_issues_open") == open_now


@pytest.mark.parametrize("replayed", [False, True], ids=["errors-not-replayed", "errors-replayed"])
def test_a_retried_tick_after_a_quota_refusal_scans_what_the_account_now_allows(tmp_path, monkeypatch, engine_db,
                                                                                replayed):
    """Contract, idempotency: a repeated request "gets the first response again"; whether an error is such a
    response is loose. A tick refused for quota (someone spent the last scans first) is retried after credits
    were added: the first target's answer depends on the reading, but a replayed refusal is not the quota now,
    so the other target is scanned under either reading, and every refusal is recorded once."""
    with synced_world(tmp_path, monkeypatch, engine_db, readings={"replay_errors": replayed}) as (sim, db):
        first, second = sim.target_ids(kind="domain", verified=True)[:2]
        limit = read_account(sim)["quotas"]["quick_scans"]["limit"]
        sim.set_usage(quick_scans=0, pack_scans=0)
        world, start_scan = sim.world, sim.world.start_scan

        def someone_spends_the_rest_first(ws_id, target_id, kind):  # called under the world's lock
            world.workspaces[ws_id].used["quick_scans"] = limit
            monkeypatch.setattr(world, "start_scan", start_scan)
            return start_scan(ws_id, target_id, kind)

        monkeypatch.setattr(world, "start_scan", someone_spends_the_rest_first)
        refused = run_scheduled(sim, db, [first, second], tick="20261124T0300")
        assert (refused["started"], refused["skipped"]) == (0, 2)

        sim.set_usage(pack_scans=10)  # credits bought; the same tick is retried
        known = {i for (i,) in query(db, "SELECT id FROM scans")}
        retried = run_scheduled(sim, db, [first, second], tick="20261124T0300")
        assert retried["started"] == (1 if replayed else 2)
        scanned = {t for i, t in query(db, "SELECT id, target_id FROM scans") if i not in known}
        assert scanned == ({second} if replayed else {first, second})
        # Each refusal of the tick is recorded once, a replayed one included.
        assert query(db, "SELECT target_id, reason FROM scan_request_skips ORDER BY target_id") == sorted(
            [(first, "scan_quota_exceeded"), (second, "quota_reserve")])
