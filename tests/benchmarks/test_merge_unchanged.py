"""The issue merge skips rows the history already holds (the merge figure's fix) with the same outcome.

Upserting every re-read issue made a re-sync with 5 % changed cost about 3.7x a plain DuckDB load; unchanged
rows now only get `last_observed_at`. These tests hold the result to what the full upsert gave: same table,
same events, unchanged rows marked seen.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import pipelines.storage.merge as merge_module
from pipelines.storage import connect
from tests.helpers import merge_issues

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)


def _issue(n: int) -> dict:
    return {
        "id": f"00000000-0000-4000-8000-{n:012d}", "project_id": f"p{n % 3}", "target_id": f"t{n % 7}",
        "address": "shop.example.com", "control_id": f"ctl-{n % 11}", "family": "server",
        "severity": ("critical", "high", "medium", "low", "info")[n % 5], "confidence": "confirmed",
        "status": "fixed" if n % 4 == 0 else "open", "title": f"Issue {n}", "explanation": "e", "detail": "d",
        "location": "/", "file": None, "line": None, "commit": None, "evidence": "ev", "fix_unlocked": False,
        "status_reason": None, "marked_by": None, "first_seen_at": "2026-11-01T00:00:00.000Z",
        "last_seen_at": "2026-11-19T00:00:00.000Z", "fixed_at": "2026-11-10T00:00:00.000Z" if n % 4 == 0 else None,
    }


def _resync(rows: list[dict]) -> list[dict]:
    out = [dict(r) for r in rows]
    out[1].update(status="fixed", fixed_at="2026-11-20T12:30:00.000Z")  # fixed
    out[4].update(status="open", fixed_at=None)  # reopened
    out[2]["severity"] = "critical"  # severity changed
    out[3]["title"] = "Reworded"  # a change that is no event
    out.append(_issue(len(rows)))  # new
    return out


def _tables(conn) -> tuple[list, list]:
    issues = conn.execute("SELECT * FROM issues ORDER BY id").fetchall()
    events = conn.execute("SELECT issue_id, observed_at, event, from_value, to_value FROM issue_events "
                          "ORDER BY issue_id, observed_at, event, from_value, to_value").fetchall()
    return issues, events


def _run(db: str) -> tuple[list, list, dict]:
    rows = [_issue(n) for n in range(60)]
    conn = connect(db)
    try:
        merge_issues(conn, "ws", rows, now=NOW)
        result = merge_issues(conn, "ws", _resync(rows), now=LATER)
        return (*_tables(conn), result.events)
    finally:
        conn.close()


def test_skipping_unchanged_rows_gives_what_the_full_upsert_gave(new_history, monkeypatch: pytest.MonkeyPatch):
    issues, events, counts = _run(new_history())
    monkeypatch.setattr(merge_module, "touch_unchanged", lambda conn, entity: None)
    full_issues, full_events, full_counts = _run(new_history())
    assert issues == full_issues
    assert events == full_events
    assert counts == full_counts == {"opened": 1, "status_changed": 1, "reopened": 1, "severity_changed": 1}


def test_unchanged_rows_are_marked_seen_and_keep_their_first_observation(engine_db):
    rows = [_issue(n) for n in range(20)]
    conn = connect(engine_db)
    try:
        merge_issues(conn, "ws", rows, now=NOW)
        merge_issues(conn, "ws", rows, now=LATER)
        seen = conn.execute("SELECT DISTINCT first_observed_at, last_observed_at FROM issues").fetchall()
        assert seen == [(NOW, LATER)]
        assert conn.execute("SELECT count(*) FROM issue_events WHERE event <> 'opened'").fetchall()[0][0] == 0
    finally:
        conn.close()
