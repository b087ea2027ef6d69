"""An unexpected value is listed once per workspace that sent it: two customers whose services send the same
new severity for the same issue id each get their own row in `ingest_warnings`, so the warning a team reads
about its workspace never depends on whether another workspace saw it first."""

from __future__ import annotations

from datetime import UTC, datetime

from pipelines.storage import connect
from tests.backends import rows
from tests.benchmarks.test_merge_unchanged import _issue
from tests.helpers import merge_issues

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


def test_the_same_unexpected_value_in_two_workspaces_is_listed_for_each(engine_db):
    issue = {**_issue(1), "severity": "catastrophic"}
    conn = connect(engine_db)
    try:
        for workspace in ("acme", "globex"):
            result = merge_issues(conn, workspace, [issue], now=NOW)
            assert ("issues", issue["id"], "severity", "catastrophic") in result.warnings, workspace
        merge_issues(conn, "acme", [issue], now=NOW)  # the same problem again: still one row for acme
    finally:
        conn.close()
    assert rows(engine_db, "SELECT workspace_id, count(*) FROM ingest_warnings WHERE field = 'severity' "
                           "GROUP BY workspace_id ORDER BY workspace_id") == [("acme", 1), ("globex", 1)]
