"""A merge leaves the planner statistics of what it wrote on PostgreSQL: the small tables a sync changes by
fewer rows than autovacuum's threshold (a fresh history's `accounts`, `projects`) are analysed from the first
sync on, and a merge that changes nothing analyses nothing (an unchanged re-sync pays no ANALYZE)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from pipelines.storage import connect, merge_account, merge_projects

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACCOUNT = {"workspace": {"id": "ws", "name": "Acme"}, "plan": "pro", "api_access": {"allowed": True},
           "quotas": {"quick_scans": {"limit": 50, "used": 3, "remaining": 47}},
           "projects": {"limit": 10, "used": 2, "paused": 0}}
PROJECTS = [{"id": f"p{n}", "name": f"Project {n}", "score": 80, "grade": "B", "open_issues": 0,
             "targets": [{"id": f"t{n}", "kind": "domain", "address": f"p{n}.example", "verified": True}]}
            for n in range(3)]


def _analysed(url: str) -> dict[str, datetime | None]:
    with psycopg.connect(url, autocommit=True) as conn:
        return dict(conn.execute("SELECT relname, last_analyze FROM pg_stat_user_tables WHERE relname IN "
                                 "('accounts', 'projects', 'targets', 'issues')").fetchall())


def test_a_merge_analyses_the_small_tables_it_wrote_and_an_unchanged_one_nothing(pg_database: str) -> None:
    """Mutation that fails it: `refresh_statistics` a no-op on PostgreSQL (the first assertion), or analysing
    every table it is given (the last)."""
    conn = connect(pg_database)
    try:
        merge_account(conn, ACCOUNT, now=NOW)
        merge_projects(conn, "ws", PROJECTS, now=NOW)
        first = _analysed(pg_database)
        assert all(first[name] is not None for name in ("accounts", "projects", "targets")), first
        assert first["issues"] is None  # nothing written there: nothing to analyse
        merge_projects(conn, "ws", PROJECTS, now=NOW + timedelta(hours=1))  # 6 rows touched: under the threshold
    finally:
        conn.close()
    assert _analysed(pg_database) == first
