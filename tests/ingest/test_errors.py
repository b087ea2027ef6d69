"""What users meet when something is wrong: one actionable line, and nothing already stored is lost."""

from __future__ import annotations

import os
import subprocess

import pytest

from pipelines.commands.sync import root_cause
from tests.ingest.conftest import Oracle, query, run_sync
from tests.reliability import forked


def _history(db) -> list:
    return query(db, "SELECT id, status, severity FROM issues ORDER BY id")


@pytest.mark.parametrize(("key_name", "expected"), [
    ("bad", "SCANWATCH_API_KEY"),
    ("free", "Pro"),
    ("trial_ended", "trial"),
    ("token_none", "scans:read"),
])
def test_credential_and_plan_problems_name_what_to_fix_and_keep_the_history(sim, env, monkeypatch, key_name, expected):
    assert run_sync().success
    before = _history(env)
    monkeypatch.setenv("SCANWATCH_API_KEY", "rst_" + "0" * 32 if key_name == "bad" else sim.keys[key_name])
    outcome = run_sync()
    assert not outcome.success
    line = root_cause(outcome.error)
    assert expected in line and "\n" not in line
    assert os.environ["SCANWATCH_API_KEY"] not in line
    assert _history(env) == before


def test_list_that_changes_while_paged_is_read_without_duplicates_and_caught_up_next_sync(sim, env):
    sim.set_faults(list_mutation_rate=1.0, list_mutation="both", scope="lists")
    outcome = run_sync()
    sim.clear_faults()
    assert outcome.success, outcome.error
    assert query(env, "SELECT count(*) - count(DISTINCT id) FROM issues")[0][0] == 0
    assert query(env, "SELECT count(*) FROM issue_events WHERE event <> 'opened'")[0][0] == 0
    # An item inserted ahead of the cursor cannot be seen by any cursor walk; the insert moved its project's
    # counts, so the next ordinary sync re-reads that project and nothing the service shows is missing.
    assert run_sync().success
    state = Oracle(sim.base_url, sim.api_key).state()
    rows = dict(query(env, "SELECT id, status FROM issues"))
    assert {i: rows.get(i) for i in state.issues_by_id()} == {i: s["status"] for i, s in state.issues_by_id().items()}


def test_unknown_enum_values_are_stored_and_warned_about(sim, env):
    sim.set_faults(future_enum_rate=0.2)
    outcome = run_sync()
    sim.clear_faults()
    assert outcome.success, outcome.error
    warned = query(env, "SELECT field, value, count(*) FROM ingest_warnings GROUP BY ALL")
    assert warned, "no warning recorded"
    stored = query(env, "SELECT count(*) FROM issues WHERE family = 'supplyChain' OR status = 'in_review' "
                        "OR severity = 'unknown'")[0][0]
    assert stored > 0
    assert sum(n for _, _, n in warned) >= stored
    assert outcome.metadata["issues"]["warnings"] > 0


def _cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return forked.run(args, env, timeout=300)


def test_cli_sync_summary_and_one_line_failures(sim, env):
    environ = dict(os.environ)
    ok = _cli(["sync"], environ)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("scanwatch sync: ok") and "requests" in ok.stdout
    bad = _cli(["sync"], {**environ, "SCANWATCH_BASE_URL": "http://127.0.0.1:9/v1"})
    assert bad.returncode != 0
    assert "SCANWATCH_BASE_URL" in bad.stderr and "Traceback" not in bad.stderr
    unset = _cli(["sync"], {k: v for k, v in environ.items() if k != "SCANWATCH_API_KEY"})
    assert unset.returncode == 2 and "SCANWATCH_API_KEY" in unset.stderr and "Traceback" not in unset.stderr
    for out in (ok.stdout + ok.stderr, bad.stdout + bad.stderr):
        assert environ["SCANWATCH_API_KEY"] not in out


def test_a_failed_sync_shows_on_the_snapshot_at_once(sim, env, monkeypatch):
    from pipelines.snapshot.format import read_snapshot

    assert run_sync().success
    snapshot = env.with_name("scanwatch-metrics.json")
    account = next(r for r in read_snapshot(snapshot)["tables"]["pipeline"] if r["asset"] == "account")
    assert (account["last_run_ok"], account["runs_failure"]) == (1, 0)
    monkeypatch.setenv("SCANWATCH_API_KEY", sim.keys["revoked"])
    assert not run_sync().success  # Dagster skips the snapshot asset; scanwatch rewrites the file anyway
    account = next(r for r in read_snapshot(snapshot)["tables"]["pipeline"] if r["asset"] == "account")
    assert (account["last_run_ok"], account["runs_failure"]) == (0, 1)


def test_a_malformed_targets_field_keeps_the_targets_and_is_warned_about(env):
    from datetime import UTC, datetime, timedelta

    from pipelines.storage import connect, merge_projects

    now = datetime(2026, 11, 1, tzinfo=UTC)
    project = {"id": "p1", "name": "Shop", "open_issues": 0, "paused": False,
               "targets": [{"id": "t1", "kind": "domain", "address": "shop.example", "verified": True}]}
    conn = connect(env)
    try:
        merge_projects(conn, "w1", [project], now=now)
        result = merge_projects(conn, "w1", [dict(project, targets="oops")], now=now + timedelta(hours=1))
        assert ("projects", "p1", "targets", "malformed") in result.warnings
        assert conn.execute("SELECT id, removed_at FROM targets").fetchall() == [("t1", None)]
        assert conn.execute("SELECT field FROM ingest_warnings WHERE entity_id = 'p1'").fetchall() == [("targets",)]
        merge_projects(conn, "w1", [dict(project, targets=[])], now=now + timedelta(hours=2))
        assert conn.execute("SELECT removed_at IS NOT NULL FROM targets").fetchall() == [(True,)]
    finally:
        conn.close()
