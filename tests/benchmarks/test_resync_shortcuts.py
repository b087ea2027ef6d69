"""What an unchanged re-sync may skip, and the pass it may not.

A re-sync that reads no list could skip the pass over the workspace's issues that sets aside those of removed
projects and targets, if every such issue were already set aside. It is not always: an issue its project's
list still held when the list was read (the target went from GET /projects but its issues were still listed, or
it came back between the two reads) is visible, whatever else, in that merge; the next pass, whatever it reads,
sets it aside while its target stays unlisted. Skipping that pass when "nothing went" or "nothing was listed"
left such issues unaccounted for as long as nothing else changed in the workspace: not open (the views leave
out a removed target's issues) and not set aside either (no `hidden` event, missing from
`secscan_issues_not_visible`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipelines.storage import connect, merge_projects
from tests.benchmarks.test_merge_unchanged import _issue
from tests.helpers import merge_issues

T0 = datetime(2026, 11, 20, 12, tzinfo=UTC)


def _project(*targets: str) -> dict:
    return {"id": "p1", "name": "Shop", "open_issues": 4, "paused": False,
            "targets": [{"id": t, "kind": "domain", "address": f"{t}.example", "verified": True} for t in targets]}


def _issues() -> list[dict]:
    return [dict(_issue(n), project_id="p1", target_id=("t1", "t2")[n % 2], status="open", fixed_at=None)
            for n in range(4)]


def _hidden(conn) -> dict[str, str | None]:
    return dict(conn.execute("SELECT target_id, max(hidden_reason) FROM issues GROUP BY target_id").fetchall())


@pytest.mark.parametrize("then", ["projects read, nothing gone", "issues merged, nothing listed"])
def test_an_issue_listed_while_its_target_was_unlisted_is_set_aside_by_the_next_pass(engine_db, then):
    """Fails if the projects merge skips its pass when no project or target went in it, or if the issue merge
    skips its pass when no list was read."""
    conn = connect(engine_db)
    try:
        merge_projects(conn, "ws", [_project("t1", "t2")], now=T0)
        merge_issues(conn, "ws", _issues(), now=T0, project_state=[("p1", "a", False)])
        merge_projects(conn, "ws", [_project("t1")], now=T0 + timedelta(hours=1))  # t2 unlisted
        assert _hidden(conn) == {"t1": None, "t2": "target_removed"}
        # p1's list, read after GET /projects, still holds t2's issues: listed, they are visible again.
        merge_issues(conn, "ws", _issues(), now=T0 + timedelta(hours=2), project_state=[("p1", "b", False)])
        assert _hidden(conn) == {"t1": None, "t2": None}

        later = T0 + timedelta(hours=3)
        if then == "projects read, nothing gone":
            merge_projects(conn, "ws", [_project("t1")], now=later)  # as before: t2 still unlisted
        else:
            merge_issues(conn, "ws", [], now=later)  # no project moved: no list read
        assert _hidden(conn) == {"t1": None, "t2": "target_removed"}  # counted as set aside, not as nothing
        hidden = conn.execute("SELECT target_id, count(*) FROM issue_events WHERE event = 'hidden' "
                              "GROUP BY target_id").fetchall()
        assert hidden == [("t2", 4)]  # each of t2's 2 issues set aside twice, each time with its event
    finally:
        conn.close()
