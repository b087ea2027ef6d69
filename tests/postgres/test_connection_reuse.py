"""A run's writers share one server connection in turn (`Engine.keeping_writers`, held by the history
resource for the run's life), each finding it as a new one would be, and no process keeps one once its run
has ended: what a user of the server sees (its sessions, its locks, its temporary tables), not how scanwatch
counts."""

from __future__ import annotations

import time

from pipelines.storage import writer
from pipelines.storage.destinations.impl import engine_for
from simulator.testing import SimConfig, serve_simulator
from tests.backends import point_at, rows, sync_history


def _sessions(db: str) -> int:
    """Sessions the server has started on the database so far (every ended one has reported by now)."""
    return rows(db, "SELECT sessions FROM pg_stat_database WHERE datname = current_database()")[0][0]


def _open_elsewhere(db: str, pid: int) -> bool:
    return bool(rows(db, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])[0][0])


def _gone(db: str, pid: int) -> bool:
    for _ in range(50):
        if not _open_elsewhere(db, pid):
            return True
        time.sleep(0.1)
    return False


def test_writers_of_a_run_share_one_session_found_as_new(pg_database):
    engine = engine_for(pg_database)
    with engine.keeping_writers():
        with writer(pg_database) as conn:
            first = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            conn.execute("CREATE TEMP TABLE left_behind (x int)")
            conn.execute("SELECT pg_advisory_lock(42)")
        with writer(pg_database) as conn:
            assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] == first
            assert conn.execute("SELECT to_regclass('pg_temp.left_behind')").fetchone()[0] is None
            assert conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                "AND pid = pg_backend_pid()").fetchone()[0] == 0
            conn.execute("BEGIN")  # handed back inside a transaction: closed, never reused
        with writer(pg_database) as conn:
            third = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            assert third != first
        assert _gone(pg_database, first)
        assert _open_elsewhere(pg_database, third)  # kept for the run's next writer
    assert _gone(pg_database, third)  # the run is over: nothing stays open


def test_outside_a_run_each_writer_has_its_own_session(pg_database):
    with writer(pg_database) as conn:
        first = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert _gone(pg_database, first)
    with writer(pg_database) as conn:
        assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != first


def test_a_workspaces_run_opens_the_history_once(pg_database, monkeypatch):
    """Every step, merge and check of a run on one session: an unchanged workspace's run had opened nine."""
    with serve_simulator(SimConfig(seed=7, scale="small", rate_limit=100000)) as sim:
        point_at(monkeypatch, sim, pg_database)
        assert sync_history().success
        before = _sessions(pg_database)
        result = sync_history()
        assert result.success
        opened = _sessions(pg_database) - before
        assert opened <= 2  # the run's, and the first count's own
