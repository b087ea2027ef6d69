"""The rules of the views layer, each at its edge, on a hand-made history: the SLA's clock and its due-soon
mark (sql/views/issue_sla.sql), which issues have a fix time (fix_times.sql), and the last successful run
the snapshot reports (sql/snapshot/pipeline.sql), which `SecscanSyncStale` measures from.

Mutations that fail it: `due_soon_at` at half the SLA instead of three quarters; the SLA's clock starting at
scanwatch's first sighting when the service gave `first_seen_at`; `fix_times` keeping a reopened issue's old
`fixed_at`; the last success counting failed runs."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.backfill.handmade import FIRST_SYNC, WS, at, history, insert
from tests.helpers import build_snapshot


def _epoch(when: dt.datetime) -> float:
    return when.timestamp()


@pytest.fixture
def conn(tmp_path):
    issues = [("seen", "p", "high", "open", at(-10), None),  # the service says when it was first seen
              ("unseen", "p", "high", "open", None, None),  # it does not: scanwatch's first sighting counts
              ("fixed", "p", "high", "fixed", at(-12), at(-4)),
              ("back", "p", "high", "open", at(-12), at(-6))]  # fixed, then open again: the old fixed_at stays
    c = history(tmp_path / "h.duckdb", projects=["p"], issues=issues)
    yield c
    c.close()


def test_the_sla_runs_from_the_services_first_sighting_and_is_due_soon_at_three_quarters(conn):
    days = conn.execute("SELECT days FROM sla_policy WHERE severity = 'high'").fetchall()[0][0]
    got = {r[0]: r[1:] for r in conn.execute(
        "SELECT issue_id, opened_at, breach_at, due_soon_at FROM issue_sla ORDER BY issue_id").fetchall()}
    for issue, opened in (("seen", _epoch(at(-10))), ("unseen", _epoch(FIRST_SYNC))):
        assert got[issue] == pytest.approx((opened, opened + days * 86400, opened + 0.75 * days * 86400)), issue


def test_only_fixed_issues_have_a_fix_time(conn):
    got = dict(conn.execute("SELECT issue_id, seconds FROM fix_times").fetchall())
    assert got == {"fixed": pytest.approx(8 * 86400)}


def test_the_last_success_is_the_last_successful_run_not_the_last_run(conn):
    insert(conn, "sync_runs", [
        {"workspace_id": WS, "run_id": "r1", "asset": "issues", "started_at": FIRST_SYNC,
         "finished_at": FIRST_SYNC + dt.timedelta(minutes=1), "status": "success"},
        {"workspace_id": WS, "run_id": "r2", "asset": "issues", "started_at": FIRST_SYNC + dt.timedelta(hours=2),
         "finished_at": FIRST_SYNC + dt.timedelta(hours=2, minutes=1), "status": "failure", "error": "x"}])
    snap = build_snapshot(conn, now=FIRST_SYNC + dt.timedelta(hours=3))
    (issues,) = [r for r in snap["tables"]["pipeline"] if r["asset"] == "issues"]
    assert issues["last_success"] == _epoch(FIRST_SYNC + dt.timedelta(minutes=1))
    assert issues["last_run_ok"] == 0


def test_a_removed_targets_issues_leave_the_open_counts_before_their_merge_marks_them(conn):
    """A run whose targets merge committed the removal and whose issues step then failed leaves the issues
    unmarked (`hidden_reason` NULL): the view itself keeps them out of every count meanwhile. Mutation that
    fails it: visible_issues.sql without its removed-target condition."""
    insert(conn, "targets", [{"workspace_id": WS, "id": "gone", "project_id": "p", "kind": "domain",
                              "address": "gone.example.com", "first_observed_at": FIRST_SYNC,
                              "last_observed_at": FIRST_SYNC, "removed_at": FIRST_SYNC + dt.timedelta(hours=1)}])
    conn.execute("UPDATE issues SET target_id = 'gone' WHERE id = 'seen'")
    assert {i for (i,) in conn.execute("SELECT id FROM open_issues_now").fetchall()} == {"unseen", "back"}
