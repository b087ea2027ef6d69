"""The snapshot's aggregates on a history whose every number is known (tests/exporter/history.py)."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime

import pytest

from pipelines.snapshot.format import SCHEMA_VERSION, SnapshotError, read_snapshot
from pipelines.sync.snapshot import TTF_BUCKETS
from tests.exporter.history import DAY, NOW, fresh_db, load_history
from tests.helpers import build_snapshot, write_snapshot


@pytest.fixture
def history_conn(engine_history_conn):
    """Every test of what the snapshot holds runs on DuckDB and on PostgreSQL."""
    return engine_history_conn


def rows(snap, table, **match):
    return [r for r in snap["tables"][table] if all(r.get(k) == v for k, v in match.items())]


def one(snap, table, **match):
    found = rows(snap, table, **match)
    assert len(found) == 1, (table, match, found)
    return found[0]


def test_header_and_every_table(snapshot):
    assert snapshot["schema"] == SCHEMA_VERSION
    assert snapshot["generated_at"] == "2026-11-01T00:00:00Z"
    assert snapshot["generated_at_seconds"] == NOW.timestamp()
    assert snapshot["sla_days"] == {"critical": 7, "high": 30, "medium": 90, "low": 180}
    json.dumps(snapshot, allow_nan=False)  # plain JSON, no NaN


def test_workspaces_cover_every_account(snapshot):
    acme = one(snapshot, "workspaces", workspace_id="ws-1")
    assert acme["workspace"] == "Acme" and acme["plan"] == "pro" and acme["api_access_allowed"] is True
    assert acme["trial_ends_at"] is None
    assert acme["pack_credits_scans"] == 5 and acme["pack_credits_fixes"] == 2
    assert (acme["projects_limit"], acme["projects_used"], acme["projects_paused"]) == (3, 2, 1)
    assert acme["last_success"] == datetime.fromisoformat("2026-10-31T23:31:00+00:00").timestamp()
    assert acme["rate_limit_remaining"] == 60
    beta = one(snapshot, "workspaces", workspace_id="ws-2")
    assert beta["trial_ends_at"] == datetime.fromisoformat("2026-11-03T00:00:00+00:00").timestamp()
    assert beta["last_success"] is None  # never synced successfully: no invented freshness


def test_quotas_take_the_latest_reading(snapshot):
    quick = one(snapshot, "quotas", workspace_id="ws-1", quota="quick_scans")
    assert (quick["quota_limit"], quick["used"], quick["remaining"]) == (100, 12, 88)
    assert one(snapshot, "quotas", quota="audits")["remaining"] == 0
    assert len(snapshot["tables"]["quotas"]) == 3


def test_removed_projects_leave_every_table(snapshot):
    for table, data in snapshot["tables"].items():
        assert not [r for r in data if r.get("project_id") == "p3"], table
    assert {r["project_id"] for r in snapshot["tables"]["projects"]} == {"p1", "p2", "p4"}


def test_targets_hidden_issues_coverage_and_last_scan(snapshot):
    t1 = one(snapshot, "targets", target_id="t1")
    assert t1["coverage"] == 0.8 and t1["last_scan_failed"] == 1  # latest finished scan failed
    assert one(snapshot, "targets", target_id="t2")["last_scan_failed"] == 0
    t3 = one(snapshot, "targets", target_id="t3")
    assert t3["hidden_issues"] == 4 and t3["coverage"] is None and t3["last_scan_failed"] is None


def test_open_detected_age_and_sla_per_severity(snapshot):
    crit = one(snapshot, "issue_severity", project_id="p1", severity="critical")
    # i1 (2d), i7 (12d, breached), i9 (exactly 7d: due soon, not breached)
    assert (crit["open"], crit["sla_breached"], crit["sla_due_soon"]) == (3, 1, 1)
    assert crit["oldest_open_age"] == 12 * DAY
    assert crit["detected"] == 3  # i1, i5, i9: i7 was first seen as high
    high = one(snapshot, "issue_severity", project_id="p1", severity="high")
    assert (high["open"], high["sla_breached"], high["sla_due_soon"], high["detected"]) == (1, 0, 1, 3)
    assert high["oldest_open_age"] == 27 * DAY
    medium = one(snapshot, "issue_severity", project_id="p1", severity="medium")
    assert (medium["open"], medium["sla_breached"], medium["oldest_open_age"]) == (1, 1, 123 * DAY)
    info = one(snapshot, "issue_severity", project_id="p2", severity="info")
    assert (info["open"], info["sla_breached"], info["sla_days"]) == (1, 0, None)  # info has no SLA
    empty = one(snapshot, "issue_severity", project_id="p4", severity="critical")
    assert (empty["open"], empty["oldest_open_age"], empty["detected"]) == (0, 0, 0)


def test_open_sum_equals_open_issues_and_detected_sum_equals_issues(snapshot, history_conn):
    open_rows = history_conn.execute(
        "SELECT count(*) FROM issues i JOIN projects p ON p.id = i.project_id "
        "WHERE i.status = 'open' AND p.removed_at IS NULL").fetchall()[0][0]
    assert sum(r["open"] for r in snapshot["tables"]["issue_severity"]) == open_rows == 6
    assert sum(r["detected"] for r in snapshot["tables"]["issue_severity"]) == 9


def test_custom_sla_days(history_conn):
    snap = build_snapshot(history_conn, now=NOW, sla_days={"critical": 1, "medium": 200})
    assert one(snap, "issue_severity", project_id="p1", severity="critical")["sla_breached"] == 3
    assert one(snap, "issue_severity", project_id="p1", severity="medium")["sla_breached"] == 0
    assert snap["sla_days"] == {"critical": 1, "high": 30, "medium": 200, "low": 180}


def test_status_and_family_grids(snapshot):
    assert one(snapshot, "issue_status", project_id="p1", status="open", severity="critical")["issues"] == 3
    assert one(snapshot, "issue_status", project_id="p1", status="fixed", severity="high")["issues"] == 1
    assert one(snapshot, "issue_status", project_id="p1", status="false_positive", severity="low")["issues"] == 1
    assert one(snapshot, "issue_status", project_id="p4", status="open", severity="info")["issues"] == 0
    assert len(rows(snapshot, "issue_status", project_id="p1")) == 4 * 5
    fam = {r["family"]: r["open"] for r in rows(snapshot, "issue_family", project_id="p1")}
    assert fam["secrets"] == 2 and fam["configuration"] == 1 and fam["vulnerableVersions"] == 1
    assert fam["database"] == 1 and fam["server"] == 0 and fam["code"] == 0  # fixed / dismissed are not open
    # a family this version does not know is kept, and the grid carries it for every project
    assert one(snapshot, "issue_family", project_id="p2", family="aiModels")["open"] == 1
    assert one(snapshot, "issue_family", project_id="p1", family="aiModels")["open"] == 0


def test_lifecycle_counters_from_events_with_zero_grid(snapshot):
    crit = one(snapshot, "lifecycle", project_id="p1", severity="critical")
    assert (crit["opened"], crit["fixed"], crit["reopened"], crit["severity_changed"]) == (3, 2, 1, 1)
    high = one(snapshot, "lifecycle", project_id="p1", severity="high")
    assert (high["opened"], high["fixed"], high["reopened"]) == (3, 1, 0)
    assert one(snapshot, "lifecycle", project_id="p1", severity="low")["dismissed"] == 1
    lab = rows(snapshot, "lifecycle", project_id="p4")
    assert {r["severity"] for r in lab} == {"critical", "high", "medium", "low", "info"}
    assert all(r["opened"] == r["fixed"] == r["reopened"] == 0 for r in lab)


def test_time_to_fix_histogram(snapshot):
    crit = one(snapshot, "time_to_fix", project_id="p1", severity="critical")
    assert crit["count"] == 1 and crit["sum"] == 7200.0
    assert crit["buckets"] == [0] + [1] * (len(TTF_BUCKETS) - 1)  # 2h: above 1h, within 4h
    high = one(snapshot, "time_to_fix", project_id="p1", severity="high")
    assert high["count"] == 1 and high["sum"] == DAY
    assert high["buckets"][TTF_BUCKETS.index(DAY)] == 1 and high["buckets"][TTF_BUCKETS.index(DAY) - 1] == 0
    assert one(snapshot, "time_to_fix", project_id="p4", severity="low")["buckets"] == [0] * len(TTF_BUCKETS)


def test_scans_grid(snapshot):
    assert one(snapshot, "scans", project_id="p1", kind="quick", status="done")["scans"] == 1
    assert one(snapshot, "scans", project_id="p1", kind="audit", status="failed")["scans"] == 1
    assert one(snapshot, "scans", project_id="p1", kind="repository", status="done")["scans"] == 1
    assert one(snapshot, "scans", project_id="p2", kind="quick", status="queued")["scans"] == 1
    assert sum(r["scans"] for r in snapshot["tables"]["scans"]) == 4


def test_pipeline_health_sums_sync_runs(snapshot):
    issues = one(snapshot, "pipeline", asset="issues")
    assert (issues["requests"], issues["retries"], issues["rate_limited"]) == (70, 4, 3)
    assert (issues["runs_success"], issues["runs_failure"], issues["last_run_ok"]) == (1, 1, 1)
    assert issues["rate_limit_remaining"] == 60 and issues["last_duration"] == 60.0
    assert issues["workspace"] == "Acme"
    account = one(snapshot, "pipeline", asset="account")
    assert account["last_success"] == datetime.fromisoformat("2026-10-31T23:00:10+00:00").timestamp()


def test_critical_list_is_capped_newest_first_and_has_no_content(snapshot, history_conn):
    crit = snapshot["tables"]["critical_issues"]
    assert [r["issue_id"] for r in crit] == ["i1", "i9"]
    for r in crit:
        assert not {"title", "evidence", "location", "detail", "explanation", "address"} & set(r)
    full = build_snapshot(history_conn, now=NOW, critical_info_limit=50)
    assert [r["issue_id"] for r in full["tables"]["critical_issues"]] == ["i1", "i9", "i7"]
    assert build_snapshot(history_conn, now=NOW, critical_info_limit=0)["tables"]["critical_issues"] == []


def test_empty_database_builds_an_empty_snapshot(fresh_history):
    snap = build_snapshot(fresh_history(), now=NOW)
    assert all(v == [] for v in snap["tables"].values())


def test_naive_now_is_refused(history_conn):
    with pytest.raises(ValueError):
        build_snapshot(history_conn, now=datetime(2026, 11, 1))


def test_reads_committed_state_and_leaves_a_caller_transaction_alone(history_conn):
    history_conn.execute("BEGIN TRANSACTION")
    history_conn.execute("UPDATE projects SET score = 10 WHERE id = 'p1'")
    snap = build_snapshot(history_conn, now=NOW)
    assert one(snap, "projects", project_id="p1")["score"] == 72  # uncommitted work is not exported
    history_conn.execute("COMMIT")  # the caller's transaction is still usable
    snap = build_snapshot(history_conn, now=NOW)
    assert one(snap, "projects", project_id="p1")["score"] == 10


def test_write_then_read_round_trip(snapshot, tmp_path):
    path = tmp_path / "sub" / "metrics.json"
    write_snapshot(snapshot, path)
    assert read_snapshot(path) == snapshot
    assert [p.name for p in path.parent.iterdir()] == ["metrics.json"]  # no temp file left behind


def test_read_refuses_missing_garbage_and_other_schema(tmp_path, snapshot):
    with pytest.raises(SnapshotError, match="cannot read"):
        read_snapshot(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 1, "tables": ')
    with pytest.raises(SnapshotError, match="not valid JSON"):
        read_snapshot(bad)
    bad.write_text(json.dumps({**snapshot, "schema": 99}))
    with pytest.raises(SnapshotError, match="schema 99"):
        read_snapshot(bad)


def test_failed_write_keeps_the_previous_snapshot(snapshot, tmp_path):
    path = tmp_path / "metrics.json"
    write_snapshot(snapshot, path)
    with pytest.raises(ValueError):
        write_snapshot({**snapshot, "bad": float("nan")}, path)
    assert read_snapshot(path) == snapshot
    assert len(list(tmp_path.iterdir())) == 1


def test_readers_never_see_a_partial_file(snapshot, tmp_path):
    """A reader racing a writer that replaces the file continuously always parses a whole document."""
    path = tmp_path / "metrics.json"
    write_snapshot(snapshot, path)
    stop = threading.Event()
    errors: list[Exception] = []

    def reader():
        while not stop.is_set():
            try:
                read_snapshot(path)
            except Exception as exc:  # pragma: no cover - the assertion reports it
                errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(60):
        write_snapshot({**snapshot, "generated_at_seconds": float(i)}, path)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert os.stat(path).st_mode & 0o777 == 0o644


def test_sla_policy_from_env_then_config():
    from pipelines.core.vocabulary import sla_policy

    assert sla_policy({}) == {"critical": 7, "high": 30, "medium": 90, "low": 180}
    assert sla_policy({"SCANWATCH_SLA_DAYS": "critical=3, low=365"})["critical"] == 3
    assert sla_policy({"SCANWATCH_SLA_DAYS": "critical=3"}, {"critical": 2, "high": 10}) == {
        "critical": 2, "high": 10, "medium": 90, "low": 180}
    with pytest.raises(ValueError, match="SCANWATCH_SLA_DAYS"):
        sla_policy({"SCANWATCH_SLA_DAYS": "urgent=1"})
    with pytest.raises(ValueError, match="sla_days"):
        sla_policy({}, {"info": 5})


def test_open_issues_agree_with_the_cookbook():
    from pipelines.core.sqlfiles import read_sql

    history_conn = fresh_db()  # the cookbook's own engines are its tests' (tests/cookbook)
    load_history(history_conn)
    snapshot = build_snapshot(history_conn, now=NOW)
    cursor = history_conn.execute(read_sql("queries/open_issues_by_project.sql"))
    total = [d[0] for d in cursor.description].index("total")
    cookbook_total = sum(r[total] for r in cursor.fetchall())
    assert sum(r["open"] for r in snapshot["tables"]["issue_severity"]) == cookbook_total


def test_a_run_with_a_failed_asset_is_not_a_successful_sync(history_conn):
    history_conn.execute(
        "INSERT INTO sync_runs VALUES ('ws-1','r3','account','2026-10-31T23:45:00Z','2026-10-31T23:45:05Z','success',"
        "1,0,0,100,1,'2026-10-13',NULL,NULL), ('ws-1','r3','issues','2026-10-31T23:45:05Z','2026-10-31T23:46:00Z',"
        "'failure',5,2,0,90,0,'2026-10-13','boom',NULL)")
    snap = build_snapshot(history_conn, now=NOW)
    acme = one(snap, "workspaces", workspace_id="ws-1")
    assert acme["last_success"] == datetime.fromisoformat("2026-10-31T23:31:00+00:00").timestamp()
    assert acme["rate_limit_remaining"] == 90  # the latest reading, whatever the outcome
    account = one(snap, "pipeline", asset="account")  # per asset, its own last success still moves
    assert account["last_success"] == datetime.fromisoformat("2026-10-31T23:45:05+00:00").timestamp()
    assert one(snap, "pipeline", asset="issues")["last_run_ok"] == 0


def test_write_removes_temp_files_a_killed_writer_left_and_keeps_a_live_ones(tmp_path):
    import os
    import time

    from tests.helpers import write_snapshot

    target = tmp_path / "scanwatch-metrics.json"
    stale = tmp_path / ".scanwatch-metrics.json.abc123.tmp"
    live = tmp_path / ".scanwatch-metrics.json.def456.tmp"
    stale.write_text("{half")
    live.write_text("{half")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    write_snapshot({"schema": 1}, target)
    assert not stale.exists() and live.exists() and target.exists()
