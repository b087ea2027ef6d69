"""A workspace added to a history the planner's statistics were taken without: its first sync reconstructs its
past in time linear in its size, not in its square.

PostgreSQL's statistics describe a workspace's rows from the ANALYZE after they arrive, and a merge analyses a
table only once a tenth of it changed (autovacuum's rule, `refresh_statistics`). A workspace added beside a
few others, whose ids fill the column's most-common list, is estimated at one row until then, and the
reconstruction of its past ran its events' window aggregates once for every one of its issues: 30 s of the
server for the simulator's 320 issues at 100 workspaces (docs/benchmarks.md, "A new workspace's past").

The situation is made as a deployment meets it: two workspaces synced for real, then the statistics of
`issues` taken while the second's issues were not there yet (deleted and analysed in one transaction, put back
after), so the planner has never seen them, as after a merge below the threshold. The statement is then
EXPLAIN ANALYZEd where the reconstruction runs it, in its transaction on its connection, just before it runs."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from pipelines.backfill.reconstruct import reconstruct_workspace
from pipelines.storage import connect
from pipelines.storage.destinations.base import Connection
from simulator.testing import SimConfig, serve_simulator
from tests.workspaces.pair import ROOT, environment

STAGE = "CREATE TEMP TABLE _bf_changes AS"


def _unseen(db: str, workspace_id: str) -> int:
    """Statistics of `issues` taken without `workspace_id`'s issues, which are then back as they were; how
    many they are."""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("ALTER TABLE issues SET (autovacuum_enabled = off)")  # no round may see them first
        with conn.transaction():
            conn.execute("CREATE TEMP TABLE kept AS SELECT * FROM issues WHERE workspace_id = %s", [workspace_id])
            conn.execute("DELETE FROM issues WHERE workspace_id = %s", [workspace_id])
            conn.execute("ANALYZE issues")  # this transaction's own deletions are not sampled
        conn.execute("INSERT INTO issues SELECT * FROM kept")
        plan = conn.execute("EXPLAIN (FORMAT JSON) SELECT * FROM issues WHERE workspace_id = %s",
                            [workspace_id]).fetchone()
        held = conn.execute("SELECT count(*) FROM issues WHERE workspace_id = %s", [workspace_id]).fetchone()
        assert plan is not None and held is not None
        assert plan[0][0]["Plan"]["Plan Rows"] <= 2 < held[0]  # hundreds of issues taken for one row
        return int(held[0])


def _loops(node: dict[str, Any]) -> int:
    """The most times any node of a plan ran."""
    return max([int(node.get("Actual Loops", 1)), *(_loops(child) for child in node.get("Plans", []))])


def test_an_unseen_workspaces_past_runs_each_part_of_its_plan_once_not_once_per_issue(
        pg_server, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation that fails it: `planning_whole_sets` a no-op on PostgreSQL (the window aggregates of
    `first_severities` then ran once for every pair of the workspace's issues: 40,000 times for 200)."""
    db = pg_server.url(pg_server.create_database())
    with serve_simulator(SimConfig(seed=7, scale="small", rate_limit=100000, pro_workspaces=2)) as sim:
        done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], cwd=ROOT,
                              env=environment(sim, tmp_path, db), capture_output=True, text=True, timeout=600)
        assert done.stdout.startswith("scanwatch sync: ok (acme, globex)"), done.stderr  # initech's key is refused
    with psycopg.connect(db) as conn:
        found = conn.execute("SELECT workspace_id FROM accounts WHERE workspace_label = 'globex'").fetchone()
    assert found is not None
    issues = _unseen(db, found[0])

    plans: list[dict[str, Any]] = []
    execute = Connection.execute

    def explained(self: Connection, sql: str, params: Any = None) -> Any:
        if STAGE in sql:
            query = sql.split(STAGE, 1)[1]
            plan = execute(self, "EXPLAIN (ANALYZE, FORMAT JSON) " + query, params).fetchone()[0]
            plans.append((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])
        return execute(self, sql, params)

    monkeypatch.setattr(Connection, "execute", explained)
    with connect(db) as conn:
        past = reconstruct_workspace(conn, found[0], now=datetime.now(UTC))

    assert past.score_rows > 0 and past.open_issue_rows > 0  # the past was rebuilt, not skipped
    assert len(plans) == 1 and plans[0]["Actual Rows"] >= issues  # a +1 for each issue, a -1 for each fixed
    assert _loops(plans[0]) <= 2, f"a part of the plan ran {_loops(plans[0])} times for {issues} issues"
