"""Upgrades: a history written by the first schema version is carried forward by the current code in
place, every row still there, and syncs on as if it had always been current."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipelines.backfill.reconstruct import reconstruct
from pipelines.storage import connect, migrate, schema_version
from pipelines.storage import db as storage_db
from pipelines.storage.views import drop_views, write_views
from simulator.testing import SimConfig, serve_simulator
from tests.helpers import history
from tests.history_dump import catalog
from tests.reliability.harness import ROOT, diff, dump, service_env, sync_in_process

ALL_TABLES = {
    "accounts": "workspace_id", "projects": "id", "targets": "id", "scans": "id", "issues": "id",
    "issue_events": "issue_id, event, observed_at", "score_snapshots": "observed_at, project_id, target_id",
    "quota_snapshots": "observed_at, quota", "sync_runs": "run_id, asset, started_at",
    "project_sync_state": "project_id", "ingest_warnings": "entity, entity_id, field",
}


def _config() -> SimConfig:
    return SimConfig(seed=83, scale="small", clock="driven", control=True, rate_limit=100000)


def _columns(db: Path) -> dict[str, str]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return {t: ", ".join(f'"{c}"' for (c,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
            [t]).fetchall()) for t in ALL_TABLES}


def _everything(db: Path, columns: dict[str, str]) -> dict[str, list[tuple]]:
    """Every row of every table in the given columns (those of version 1), observation timestamps included:
    an upgrade may change none of them."""
    with duckdb.connect(str(db), read_only=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return {t: conn.execute(f"SELECT {columns[t]} FROM {t} ORDER BY {order}").fetchall()
                for t, order in ALL_TABLES.items()}


def _sync_as_version_1(sim, db: Path, tmp: Path) -> None:
    """A history in schema version 1 holding a real sync: the current code syncs into a scratch file, and the
    rows are copied, in version 1's columns, into a file that knew only the first migration."""
    scratch = tmp / "scratch-current.duckdb"
    assert sync_in_process(sim, scratch).success
    with history(duckdb.connect(str(db))) as conn:
        migrate(conn, target=1)
        conn.execute(f"ATTACH '{scratch}' AS cur (READ_ONLY)")
        for table in ALL_TABLES:
            cols = ", ".join(f'"{c}"' for (c,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND table_catalog = ? "
                "ORDER BY ordinal_position", [table, db.stem]).fetchall())
            conn.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM cur.{table}")
        conn.execute("DETACH cur")
    scratch.unlink()


def _views(db: Path) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return {r[0] for r in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}


def _open_now(db: Path) -> tuple[list, list]:
    """The view's ids, and the same question asked of the tables directly."""
    with duckdb.connect(str(db), read_only=True) as conn:
        view = conn.execute("SELECT id, project_name FROM open_issues_now ORDER BY id").fetchall()
        direct = conn.execute(
            "SELECT i.id, p.name FROM issues i JOIN projects p ON p.id = i.project_id WHERE i.status = 'open' "
            "AND p.removed_at IS NULL ORDER BY i.id").fetchall()
    return view, direct


def test_a_version_1_history_is_upgraded_in_place_and_syncs_on(tmp_path):
    assert storage_db.latest_version() >= 2, "no migration after the first to upgrade to"
    old, ref = tmp_path / "old.duckdb", tmp_path / "reference.duckdb"
    with serve_simulator(_config()) as ref_sim:  # the same world, always on the current schema
        assert sync_in_process(ref_sim, ref).success
        ref_sim.run_round()
        assert sync_in_process(ref_sim, ref).success
    with serve_simulator(_config()) as sim:
        _sync_as_version_1(sim, old, tmp_path)
        with history(duckdb.connect(str(old))) as conn:
            assert schema_version(conn) == 1
        v1 = _columns(old)
        before = _everything(old, v1)
        assert before["issues"] and before["issue_events"] and before["scans"]
        assert "open_issues_now" not in _views(old)

        conn = connect(old)  # the current code opens it: the upgrade
        try:
            assert schema_version(conn) == storage_db.latest_version()
            assert migrate(conn) == []  # nothing left to apply the second time
        finally:
            conn.close()
        assert _everything(old, v1) == before
        view, direct = _open_now(old)
        assert view and view == direct

        sim.run_round()
        outcome = sync_in_process(sim, old)
        assert outcome.success, outcome.error
    # The upgraded history reconstructs its past at its first sync after the upgrade (version 1 had no
    # reconstruction), from the world as it is then; the reference did so at its own first sync, one round
    # earlier. Everything else is the same history; the past is the one the reference rebuilds from the same
    # rows (`scanwatch backfill`).
    past = ("reconstructed_score_runs", "reconstructed_open_issue_runs", "reconstruction_runs")
    assert diff(dump(old), dump(ref), ignore=past) == {}
    assert _open_now(old)[0] == _open_now(ref)[0]
    rebuilt = tmp_path / "reference-rebuilt.duckdb"
    shutil.copyfile(ref, rebuilt)
    with history(duckdb.connect(str(rebuilt))) as conn:
        reconstruct(conn)
    upgraded, reference = dump(old), dump(rebuilt)
    for table in ("reconstructed_score_runs", "reconstructed_open_issue_runs"):
        assert upgraded[table] == reference[table], table


LATER_MIGRATIONS = sorted(p.name for p in (storage_db.sql_dir() / "migrations").glob("0*.sql")
                          if not p.name.startswith("001"))
# A type's stand-in value, to give every table a row (catalog types in lower case).
FILLERS = {"varchar": "'x'", "integer": "1", "bigint": "1", "boolean": "true", "double": "0.5", "json": "'{}'",
           "date": "DATE '2026-01-02'", "timestamp with time zone": "TIMESTAMPTZ '2026-01-02 03:04:05+00'"}


@pytest.fixture(scope="module")
def populated(tmp_path_factory) -> Path:
    """A history holding a real sync, and at least one row in every table (a hand-made one where a sync of
    this world writes none), so that a migration that empties or recreates any table is seen."""
    db = tmp_path_factory.mktemp("populated") / "history.duckdb"
    with serve_simulator(_config()) as sim:
        assert sync_in_process(sim, db).success
    with duckdb.connect(str(db)) as conn:
        for table, columns in catalog(conn).items():
            if conn.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0] == 0:
                values = ", ".join(FILLERS[t] for _, t in columns)
                conn.execute(f'INSERT INTO "{table}" VALUES ({values})')
    return db


@pytest.mark.parametrize("name", LATER_MIGRATIONS)
def test_each_later_migration_can_be_applied_twice_without_harm(populated, tmp_path, name):
    """IF NOT EXISTS everywhere: a history upgraded by hand, or half-way by an older tool, still upgrades, and
    applying a migration again to a history that holds rows in every table changes none of them.

    Mutation that fails it (and passed the former form, which re-applied each file to an empty history):
    `CREATE TABLE IF NOT EXISTS scan_request_skips` in 008_scan_request_skips.sql written
    `CREATE OR REPLACE TABLE scan_request_skips`."""
    db = tmp_path / "h.duckdb"
    shutil.copyfile(populated, db)
    before = dump(db)
    assert all(before[t] for t in before), [t for t in before if not before[t]]
    conn = history(duckdb.connect(str(db)))
    try:
        version = schema_version(conn)
        drop_views(conn)  # as `migrate` runs every migration: a view may take the name of a table it replaced
        # It and every later one again, in order, as an upgrade that stopped after it starts again: a later
        # migration may replace what it made (020 turns 005's tables into runs and views of their names).
        for again in LATER_MIGRATIONS[LATER_MIGRATIONS.index(name):]:
            conn.execute(storage_db.read_sql(f"migrations/{again}"))
        assert schema_version(conn) == version
        write_views(conn)
        views = [v for (v,) in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
        for view in views:  # every view still binds to the tables it reads
            conn.execute(f'SELECT count(*) FROM "{view}"').fetchall()
    finally:
        conn.close()
    assert diff(dump(db), before) == {}


def test_a_sync_killed_while_it_upgrades_the_history_leaves_version_1_whole_and_the_next_one_upgrades(
        tmp_path, figures):
    """The upgrade runs in one transaction: SIGKILL before its commit leaves the old schema and every row."""
    db = tmp_path / "old.duckdb"
    with serve_simulator(_config()) as sim:
        _sync_as_version_1(sim, db, tmp_path)
        v1 = _columns(db)
        before = _everything(db, v1)
        killed = subprocess.run([sys.executable, "-m", "tests.reliability.kill_at", "migrate.before_commit",
                                 "sync", "--quiet"], cwd=ROOT, env=service_env(sim, db),
                                capture_output=True, text=True, timeout=300)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        figures["crashes: kill points tried"] += 1
        with history(duckdb.connect(str(db))) as conn:
            assert schema_version(conn) == 1
        assert _everything(db, v1) == before
        assert sync_in_process(sim, db).success
        with history(duckdb.connect(str(db))) as conn:
            assert schema_version(conn) == storage_db.latest_version()


# Day rows as schema 19 held them: (workspace, day of January 2026, project, target, score, grade, scan).
SCORE_DAYS = ([("a", d, "p", "t1", 70, "C", "s1") for d in (1, 2, 3)] + [("a", 4, "p", "t1", 80, "B", "s2")]
              + [("a", d, "p", "t1", 70, "C", "s1") for d in (5, 6, 8)]  # the same values again, then after a gap
              + [("a", d, "p", None, None, None, None) for d in (1, 2)]  # a project's row
              + [("b", d, "p", "t1", 70, "C", "s1") for d in (1, 2, 3)]  # another workspace, the same values
              + [("b", 2, "p", "t1", 70, "C", "s1")])  # a row held twice, one day (the tables had no key)
SCORE_RUNS = 6  # a's t1: 1-3, 4, 5-6, 8; a's project: 1-2; b's t1: 1-3
OPEN_DAYS = ([("a", d, "p", "high", n) for d, n in ((1, 2), (2, 2), (3, 3), (4, 2))]
             + [("a", d, "p", "low", 0) for d in (1, 2, 3, 4)])
OPEN_RUNS = 4  # high: 1-2, 3, 4; low: 1-4


def test_schema_20_keeps_the_reconstructed_days_as_runs_and_the_views_give_back_every_day(tmp_path):
    """Migration 20 moves the reconstruction's day rows into runs of consecutive equal days; the views of the
    former tables' names give back exactly the rows those tables held.

    Mutations that fail it: a run's island numbered across values (A, B, A of one target as one run), or across
    workspaces; the day gap ignored; the project's NULLs dropping its rows; a row held twice counted as two
    days (its run then stretched over the next day)."""
    from datetime import date

    def day(d: int) -> date:
        return date(2026, 1, d)

    def ordered(rows):
        return sorted(rows, key=lambda r: tuple((v is None, "" if v is None else v) for v in r))

    scores = ordered((w, day(d), *rest) for w, d, *rest in SCORE_DAYS)
    opened = ordered((w, day(d), *rest) for w, d, *rest in OPEN_DAYS)
    with history(duckdb.connect(str(tmp_path / "h.duckdb"))) as conn:
        migrate(conn, target=19)
        conn.raw.executemany("INSERT INTO reconstructed_scores VALUES (?, ?, ?, ?, ?, ?, ?)", scores)
        conn.raw.executemany("INSERT INTO reconstructed_open_issues VALUES (?, ?, ?, ?, ?)", opened)
        migrate(conn)
        assert ordered(conn.execute("SELECT * FROM reconstructed_scores").fetchall()) == ordered(set(scores))
        assert ordered(conn.execute("SELECT * FROM reconstructed_open_issues").fetchall()) == opened
        assert conn.execute("SELECT count(*) FROM reconstructed_score_runs").fetchall() == [(SCORE_RUNS,)]
        assert conn.execute("SELECT count(*) FROM reconstructed_open_issue_runs").fetchall() == [(OPEN_RUNS,)]
