"""The issue transitions, decided once (sql/views/status_moves.sql): an issue that leaves `fixed` came back
after a fix, whichever event recorded it. A `fixed -> open` status change counts as a regression in every
reader: the `reopenings` view (the cookbook's and the dashboard's regressions), the lifecycle counter
`secscan_issue_reopened_total`, and the new-critical pages (`critical_arrivals`), on both engines.

Before the one definition the lifecycle counter counted only `reopened` events, and the new-critical pages
only `reopened` events and withdrawn marks: the same history gave one regression in the cookbook and none
on /metrics."""

from __future__ import annotations

import datetime as dt

from tests.backfill.handmade import FIRST_SYNC, WS, at, history, insert
from tests.helpers import build_snapshot


def _event(issue: str, when: dt.datetime, event: str, old: str, new: str) -> dict:
    return {"workspace_id": WS, "issue_id": issue, "project_id": "p", "severity": "critical", "observed_at": when,
            "event": event, "from_value": old, "to_value": new}


def test_a_fixed_to_open_status_change_is_a_regression_in_every_reader(engine_db: str) -> None:
    conn = history(engine_db, projects=["p"],
                   issues=[("changed", "p", "critical", "open", at(-3), None),
                           ("reopened", "p", "critical", "open", at(-3), None),
                           ("unmarked", "p", "critical", "open", at(-3), None)])
    try:
        insert(conn, "sync_runs", [{"workspace_id": WS, "run_id": "r1", "asset": "issues", "started_at": FIRST_SYNC,
                                    "finished_at": FIRST_SYNC + dt.timedelta(minutes=1), "status": "success"}])
        insert(conn, "issue_events", [_event("changed", at(2), "status_changed", "fixed", "open"),
                                      _event("reopened", at(2), "reopened", "fixed", "open"),
                                      _event("unmarked", at(2), "status_changed", "false_positive", "open")])
        regressions = {i for (i,) in conn.execute("SELECT issue_id FROM reopenings").fetchall()}
        assert regressions == {"changed", "reopened"}
        snap = build_snapshot(conn, now=at(3))
        (critical,) = [r for r in snap["tables"]["lifecycle"] if r["severity"] == "critical"]
        assert critical["reopened"] == 2
        changes = {r["issue_id"]: r["change"] for r in snap["tables"]["critical_arrivals"]}
        assert changes == {"changed": "reopened", "reopened": "reopened", "unmarked": "unmarked"}
    finally:
        conn.close()
