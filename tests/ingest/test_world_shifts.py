"""Issues the service stops listing (site unproved, target or project removed) are set aside, never open.

Each case drives the simulator's world over real HTTP, syncs with the real assets and reads what a user
reads: the history, the `open_issues_now` view, the cookbook and `/metrics` (the exporter's exposition of the
snapshot the sync wrote).
"""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import build_registry
from tests.ingest.conftest import Oracle, query, run_sync


def _metrics(db) -> dict[tuple[str, tuple], float]:
    text = generate_latest(build_registry(db.with_name("scanwatch-metrics.json"))).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _sum(metrics: dict, name: str, **labels: str) -> float:
    return sum(v for (n, lab), v in metrics.items() if n == name and all((k, x) in lab for k, x in labels.items()))


def _listed_open(sim) -> int:
    oracle = Oracle(sim.base_url, sim.api_key)
    return sum(1 for i in oracle.state().all_issues() if i["status"] == "open")


def _cookbook(db, name: str) -> list[dict]:
    from pipelines.core import sqlfiles
    from pipelines.storage.read_only import execute_read_only

    columns, rows = execute_read_only(db, sqlfiles.cookbook()[name].sql)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _open_counts_agree(sim, db) -> int:
    """Every open count a user reads equals what the service lists as open now."""
    listed = _listed_open(sim)
    metrics = _metrics(db)
    assert _sum(metrics, "secscan_issues_open") == listed
    assert query(db, "SELECT count(*) FROM open_issues_now")[0][0] == listed
    assert sum(r["total"] for r in _cookbook(db, "open_issues_by_project")) == listed
    assert _cookbook(db, "open_issues_by_day")[-1]["total"] == listed
    assert _sum(metrics, "secscan_issues_by_status", status="open") == listed
    assert sum(r["open_issues"] for r in _cookbook(db, "noisiest_controls")) <= listed
    return listed


def _verified_site_with_open_issues(sim) -> str:
    with sim.world.lock:
        return max(sim.target_ids(kind="domain", verified=True), key=lambda t: sim.world.targets[t].open_issues)


def test_a_site_that_loses_its_proof_sets_its_issues_aside_and_gets_them_back(sim, env):
    target = _verified_site_with_open_issues(sim)
    assert run_sync().success
    before = dict(query(env, f"SELECT id, status FROM issues WHERE target_id = '{target}'"))
    open_before = sum(1 for s in before.values() if s == "open")
    assert open_before > 0

    sim.unverify_target(target)
    assert run_sync().success
    rows = query(env, f"SELECT id, status, hidden_reason FROM issues WHERE target_id = '{target}'")
    assert {r[0]: r[1] for r in rows} == before  # the service never said they were fixed
    assert {r[2] for r in rows} == {"unverified"}
    assert query(env, f"SELECT count(*) FROM issue_events WHERE event = 'hidden' AND target_id = '{target}'")[0][0] \
        == len(before)
    assert query(env, "SELECT count(*) FROM issue_events WHERE event IN ('status_changed', 'reopened')")[0][0] == 0
    _open_counts_agree(sim, env)
    metrics = _metrics(env)
    assert _sum(metrics, "secscan_issues_not_visible", reason="unverified") == len(before)
    assert _sum(metrics, "secscan_target_hidden_issues", target_id=target) == open_before  # counted once, there
    assert not [r for r in _cookbook(env, "sla_breaches") if r["issue_id"] in before]

    sim.verify_target(target)
    assert run_sync().success
    rows = query(env, f"SELECT id, status, hidden_reason FROM issues WHERE target_id = '{target}'")
    assert {r[0]: r[1] for r in rows} == before and {r[2] for r in rows} == {None}
    events = query(env, f"SELECT event, count(*) FROM issue_events WHERE target_id = '{target}' "
                        "AND event <> 'opened' GROUP BY 1")
    assert dict(events) == {"hidden": len(before), "visible_again": len(before)}  # no reopened
    assert _open_counts_agree(sim, env) >= open_before
    assert _sum(_metrics(env), "secscan_issues_not_visible") == 0


def test_a_removed_target_keeps_its_rows_and_leaves_the_open_counts(sim, env):
    target = _verified_site_with_open_issues(sim)
    assert run_sync().success
    issues_before = query(env, f"SELECT count(*) FROM issues WHERE target_id = '{target}'")[0][0]
    scans_before = query(env, f"SELECT count(*) FROM scans WHERE target_id = '{target}'")[0][0]

    sim.remove_target(target)
    assert run_sync().success
    assert query(env, f"SELECT count(*), count(*) FILTER (WHERE hidden_reason = 'target_removed') FROM issues "
                      f"WHERE target_id = '{target}'")[0] == (issues_before, issues_before)
    assert query(env, f"SELECT count(*) FROM scans WHERE target_id = '{target}'")[0][0] == scans_before
    assert query(env, f"SELECT removed_at IS NOT NULL FROM targets WHERE id = '{target}'")[0][0]
    _open_counts_agree(sim, env)
    assert _sum(_metrics(env), "secscan_issues_not_visible", reason="target_removed") == issues_before


def test_a_removed_project_stays_queryable_and_leaves_every_count(sim, env):
    assert run_sync().success
    project = max(sim.project_ids(), key=lambda p: query(env, f"SELECT count(*) FROM issues WHERE project_id = '{p}'"
                                                               " AND status = 'open'")[0][0])
    counts = query(env, f"SELECT (SELECT count(*) FROM issues WHERE project_id = '{project}'), "
                        f"(SELECT count(*) FROM scans WHERE project_id = '{project}'), "
                        f"(SELECT count(*) FROM issue_events WHERE project_id = '{project}')")[0]

    sim.delete_project(project)
    assert run_sync().success
    assert query(env, f"SELECT count(*) FROM issues WHERE project_id = '{project}' "
                      "AND hidden_reason = 'project_removed'")[0][0] == counts[0]
    assert query(env, f"SELECT count(*) FROM scans WHERE project_id = '{project}'")[0][0] == counts[1]
    assert query(env, f"SELECT count(*) FROM issue_events WHERE project_id = '{project}' AND event <> 'hidden'"
                 )[0][0] == counts[2]
    _open_counts_agree(sim, env)
    assert _sum(_metrics(env), "secscan_issues_not_visible", reason="project_removed") == counts[0]
    # A later sync changes nothing more.
    events = query(env, "SELECT count(*) FROM issue_events")[0][0]
    assert run_sync().success
    assert query(env, "SELECT count(*) FROM issue_events")[0][0] == events
