"""A workspace's run reads its own workspace's rows, never every workspace's: one PostgreSQL database holds
every workspace a deployment follows, and a statement of one workspace's run that scans a table's every row
makes each run cost more with every workspace followed (a thousand workspaces: a thousand times a thousand).

Each statement of the files a workspace's run executes is planned (EXPLAIN, nothing runs) with sequential
scans priced out (`enable_seqscan = off`): where an index can find the workspace's rows the planner takes it,
so a sequential scan of a table holding workspaces' rows that remains is one no index can answer, a read of
every workspace. The figures behind it: `python -m benchmarks.pg_workspace_reads` (docs/benchmarks.md)."""

from __future__ import annotations

import json
import re
from typing import Any

from pipelines.core.sqlfiles import read_sql, sql_dir
from pipelines.storage import connect

# The files a workspace's run executes with its workspace named. Not here: `snapshot/parts.sql` (every part,
# for a whole build), `sync/pending_by_workspace.sql` (the sensor's one read of every workspace) and
# `sync/target_projects.sql` (the scheduled scans' job, not a workspace's run).
FOLDERS = ("snapshot", "sync", "ownership")
EVERY_WORKSPACE = {"snapshot/parts.sql", "sync/pending_by_workspace.sql", "sync/target_projects.sql"}
MERGE = ("merge/scans_gone.sql", "merge/issues_hidden.sql", "merge/ingest_warning.sql", "merge/events_written.sql",
         "merge/removed_any.sql", "backfill/workspaces.sql")
NOW = "2026-10-13T00:00:00+00:00"
VALUES: dict[str, Any] = {
    "workspace_id": "ws", "label": "ws", "workspace_label": "ws", "now": NOW, "peek_before": NOW,
    "reconcile_before": NOW, "started_at": NOW, "finished_at": NOW, "all": False, "full": False,
    "limit": 10, "critical_limit": 10, "critical_new_limit": 10, "page_size": 100, "title_cap": 200,
    "location_cap": 200, "requests": 1, "retries": 0, "rate_limited": 0, "rate_limit_remaining": 1,
    "rows_written": 1, "idle": 1, "rules": [1], "full_reconciles": [False], "ttf_buckets": [3600.0], "only": ["p"],
}


def _value(name: str) -> Any:
    if name in VALUES:
        return VALUES[name]
    if name.endswith("s") and name not in {"status"}:  # $project_ids, $only, $teams, ...: a list of names
        return ["p"]
    return "x"


def _files() -> list[str]:
    files = [f"{folder}/{p.name}" for folder in FOLDERS for p in sorted((sql_dir() / folder).glob("*.sql"))]
    return [*(f for f in files if f not in EVERY_WORKSPACE), *MERGE]


def _scans(node: dict[str, Any], tables: set[str], found: list[str]) -> None:
    """Scans of a workspaces' table no index narrows: sequential (priced out, so no index could serve), or a
    whole index walked with no condition on the workspace at all (a materialized CTE reads so). A walk that
    filters on the workspace is the planner's choice of order on empty tables, not a read of every workspace."""
    whole = node.get("Node Type") == "Seq Scan" or (
        node.get("Node Type") in {"Index Scan", "Index Only Scan"} and not node.get("Index Cond")
        and "workspace_id" not in (node.get("Filter") or ""))
    if whole and node.get("Relation Name") in tables:
        found.append(node["Relation Name"])
    for child in node.get("Plans", []):
        _scans(child, tables, found)


_SETUP = re.compile(r"^\s*(CREATE|DROP|DELETE|INSERT INTO (merge_context|listed_issue_ids))\b", re.I)


def _without_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def test_a_workspace_run_reads_its_workspace_by_an_index(pg_database: str) -> None:
    """Mutation that fails it: `sync/issue_pages_estimate.sql` counting issues by `project_id` alone, the
    `project_fingerprints` view reading a project's targets by project alone (`sync/issue_projects.sql`,
    `sync/scan_projects.sql`), `merge/ingest_warning.sql` comparing workspaces with IS NOT DISTINCT FROM, or
    migration 018's index left out (a workspace found by its name)."""
    with connect(pg_database) as conn:
        tables = {name for (name,) in conn.execute(
            "SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables t "
            "USING (table_schema, table_name) WHERE c.table_schema = current_schema() "
            "AND c.column_name = 'workspace_id' AND t.table_type = 'BASE TABLE'").fetchall()}
        conn.execute(read_sql("merge/context.sql").split(";")[0])
        conn.execute("INSERT INTO merge_context VALUES ('ws', CAST($now AS TIMESTAMPTZ), 'v')", {"now": NOW})
        conn.execute("SET enable_seqscan = off")
        scanned: list[str] = []
        for relative in _files():
            for k, statement in enumerate(conn.split_statements(read_sql(relative))):
                params = {name: _value(name) for name in statement.named_parameters}
                text = _without_comments(statement.query)
                if _SETUP.match(text):
                    if not text.lstrip().upper().startswith(("DELETE", "INSERT")):
                        conn.execute(statement.query, params)
                    continue
                plan = conn.execute("EXPLAIN (FORMAT JSON) " + statement.query, params).fetchone()[0]
                plan = json.loads(plan) if isinstance(plan, str) else plan
                found: list[str] = []
                _scans(plan[0]["Plan"], tables, found)
                scanned += [f"{relative} (statement {k + 1}) reads every workspace's {table}" for table in found]
        assert scanned == []
