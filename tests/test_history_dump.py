"""The whole-history dump (tests/history_dump.py) is one comparison for both engines: the same rows stored in a
DuckDB file and in a real PostgreSQL database dump alike, whatever each engine's session time zone, and the
columns it leaves out are exactly scanwatch's clock."""

from __future__ import annotations

import duckdb
import psycopg

from tests.history_dump import Dump, added, diff, dump_history, intact, lost

SCHEMA = """
CREATE TABLE projects (workspace_id VARCHAR NOT NULL, id VARCHAR, name VARCHAR, score INTEGER, paused BOOLEAN,
                       last_scan_at TIMESTAMPTZ, first_observed_at TIMESTAMPTZ, last_observed_at TIMESTAMPTZ,
                       removed_at TIMESTAMPTZ);
CREATE TABLE accounts (workspace_id VARCHAR, features JSON, period_end DATE, coverage DOUBLE PRECISION);
CREATE TABLE score_snapshots (workspace_id VARCHAR, observed_at TIMESTAMPTZ, project_id VARCHAR, score INTEGER);
CREATE TABLE issue_events (workspace_id VARCHAR, issue_id VARCHAR, observed_at TIMESTAMPTZ, event VARCHAR);
CREATE VIEW open_projects AS SELECT * FROM projects WHERE removed_at IS NULL;
"""
ROWS = """
INSERT INTO projects VALUES
  ('w1', 'p1', 'Shop', 70, false, TIMESTAMPTZ '2026-11-01 10:00:00+00', now(), now(), NULL),
  ('w1', 'p2', 'Blog', NULL, true, TIMESTAMPTZ '2026-11-02 23:30:00-05', now(), now(), now());
INSERT INTO accounts VALUES ('w1', '{"b": true, "a": [1, 2]}', DATE '2026-12-11', 0.73);
INSERT INTO score_snapshots VALUES
  ('w1', TIMESTAMPTZ '2026-11-20 01:00:00+00', 'p1', 70), ('w1', TIMESTAMPTZ '2026-11-21 01:00:00+00', 'p1', 70);
INSERT INTO issue_events VALUES
  ('w1', 'i1', TIMESTAMPTZ '2026-11-20 01:00:00+00', 'opened'),
  ('w1', 'i1', TIMESTAMPTZ '2026-11-21 01:00:00+00', 'opened');
"""


def _statements(text: str) -> list[str]:
    return [s for s in text.split(";") if s.strip()]


def test_a_duckdb_file_and_a_postgresql_database_holding_the_same_rows_dump_alike(tmp_path, pg_database):
    """Mutation that fails it: `_normalizer` leaving JSON as each engine gives it (DuckDB's text, psycopg's
    parsed value)."""
    path = tmp_path / "h.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("SET TimeZone = 'America/New_York'")
        for statement in _statements(SCHEMA) + _statements(ROWS):
            conn.execute(statement)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'Asia/Tokyo'")
        for statement in _statements(SCHEMA.replace(" JSON,", " JSONB,")) + _statements(ROWS):
            conn.execute(statement)
    on_duckdb, on_postgres = dump_history(path), dump_history(pg_database)
    assert diff(on_duckdb, on_postgres) == {}
    assert on_duckdb.columns["projects"] == ("workspace_id", "id", "name", "score", "paused", "last_scan_at",
                                             "removed_at")
    assert "open_projects" not in on_duckdb  # views are computed from the tables, not history of their own
    shop, blog = on_duckdb.records("projects")
    assert (shop["removed_at"], blog["removed_at"]) == (False, True)  # scanwatch's clock: only whether it is set
    assert blog["last_scan_at"].isoformat() == "2026-11-03T04:30:00+00:00"  # the service's time, kept, in UTC
    assert on_duckdb["accounts"] == on_postgres["accounts"] == [
        ("w1", '{"a":[1,2],"b":true}', on_duckdb["accounts"][0][2], 0.73)]
    assert on_duckdb["score_snapshots"] == [("w1", "p1", 70)]  # the same sample twice: one fact seen twice
    assert on_duckdb["issue_events"] == [("w1", "i1", "opened")] * 2  # an event twice is two events


def test_lost_added_and_intact_tell_what_changed():
    before = Dump({"projects": [("w1", "p1"), ("w1", "p2")], "sync_runs": [("w1", "issues", "success")]},
                  columns={"projects": ("workspace_id", "id"), "sync_runs": ("workspace_id", "asset", "status")})
    after = Dump({"projects": [("w1", "p1"), ("w2", "p2")],
                  "sync_runs": [("w1", "issues", "failure"), ("w1", "issues", "success")]}, columns=before.columns)
    assert lost(after, before) == {"projects": [("w1", "p2")]}
    assert added(after, before) == {"projects": [("w2", "p2")], "sync_runs": [("w1", "issues", "failure")]}
    assert set(intact(after, before)) == {"projects"}  # a row under another workspace is a change
    assert intact(Dump({**before, "sync_runs": after["sync_runs"]}), before) == {}  # a run's own record may grow
