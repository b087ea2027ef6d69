"""One PostgreSQL database holds every workspace a deployment follows: each table that holds workspaces' rows
finds one workspace's rows by an index, never by scanning every workspace's."""

from __future__ import annotations

import psycopg

from pipelines.storage import connect


def test_every_table_with_workspaces_rows_reads_one_workspace_by_an_index(pg_database: str) -> None:
    """Mutation that fails it: any `CREATE INDEX` line of migration 015 left out, or a new table with a
    `workspace_id` column and no index leading with it (a primary key leading with it serves)."""
    connect(pg_database).close()
    with psycopg.connect(pg_database, autocommit=True) as conn:
        tables = [name for (name,) in conn.execute(
            "SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables t "
            "USING (table_schema, table_name) WHERE c.table_schema = current_schema() "
            "AND c.column_name = 'workspace_id' AND t.table_type = 'BASE TABLE' ORDER BY 1").fetchall()]
        assert {"issues", "issue_events", "scans", "targets", "projects"} <= set(tables)
        conn.execute("SET enable_seqscan = off")  # with an index to use, the planner takes it; without, it cannot
        scanned = []
        for table in tables:
            plan = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {table} WHERE workspace_id = 'ws'").fetchone()[0]
            if plan[0]["Plan"]["Node Type"] == "Seq Scan":
                scanned.append(table)
        assert scanned == []
