"""A DuckDB history file is attached to the process's one in-memory DuckDB while connections use it
(pipelines/storage/destinations/impl/duckdb/sql_client.py): it must hold DuckDB's file lock exactly as long as
a connection of its own would, and several files open in one process must never see each other's tables."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from pipelines.core.sqlfiles import read_sql
from pipelines.storage import connect
from pipelines.storage import db as storage_db
from pipelines.storage.destinations.errors import HistoryLockedError
from tests.backends import rows

LATEST = storage_db.latest_version()


def _has_table(conn, name: str) -> bool:
    """What the migrations ask before each step (sql/storage/table_exists.sql)."""
    return conn.execute(read_sql("storage/table_exists.sql"), {"name": name}).fetchall() == [(True,)]


def _another_process_can_write(path: Path) -> bool:
    code = f"import duckdb; duckdb.connect({str(path)!r}).close()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0


def test_the_file_is_locked_while_any_connection_of_the_process_is_open_and_released_after(tmp_path):
    """Mutation that fails it: a file never detached (the lock kept for the process's life)."""
    path = tmp_path / "history.duckdb"
    first, second = connect(path), connect(path)
    first.close()
    assert not _another_process_can_write(path)  # the second connection still holds it
    second.close()
    assert _another_process_can_write(path)


def test_two_histories_open_in_one_process_see_only_their_own_tables(tmp_path):
    """A new history opened while another is open gets every migration of its own. Mutation that fails it: the
    table lookup of the migrations (sql/storage/table_exists.sql) without its catalog, which then finds the
    other file's views layer and clears a `view_layer` the new file does not have yet."""
    older, newer = tmp_path / "older.duckdb", tmp_path / "newer.duckdb"
    with connect(older) as held:
        held.execute("CREATE TABLE only_in_older (x INTEGER)")
        with connect(newer) as conn:
            assert not _has_table(conn, "only_in_older")
            assert _has_table(held, "only_in_older")
    assert [v for (v,) in rows(newer, "SELECT version FROM schema_migrations ORDER BY version")] == list(
        range(1, LATEST + 1))


def test_an_empty_file_a_failed_creation_left_becomes_the_history(tmp_path):
    """DuckDB creates a database file empty before it writes it, and refuses a file left empty for good (seen
    once in `make demo`, both first runs failing). Mutation that fails it: the file created in place by DuckDB
    again."""
    path = tmp_path / "history.duckdb"
    path.touch()
    with connect(path) as conn:
        assert storage_db.schema_version(conn) == LATEST
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")]


def test_an_empty_file_another_process_holds_is_left_to_it(tmp_path):
    """An empty file whose creator holds its lock (it has not written it yet) is not replaced under it."""
    path = tmp_path / "history.duckdb"
    path.touch()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
         "fcntl.lockf(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        inode = path.stat().st_ino
        with pytest.raises((HistoryLockedError, duckdb.IOException)):  # the file is its creator's
            connect(path, wait_seconds=0).close()
        assert path.stat().st_ino == inode and path.stat().st_size == 0
    finally:
        holder.kill()
        holder.wait(30)


def _turn(path: Path):
    """A writer's turn on the file, as a step of a sync takes it (pipelines/storage/db.writer)."""
    return storage_db.writer(path)


def _another_writer_waits(path: Path, then=lambda conn: None) -> threading.Thread:
    """A thread of the process waiting for its turn on the file (as the other workspaces of a sync do), which
    runs `then` in it once it has it."""
    from pipelines.storage.destinations.impl.duckdb import sql_client

    def write() -> None:
        with _turn(path) as conn:
            then(conn)

    thread = threading.Thread(target=write)
    thread.start()
    deadline = time.monotonic() + 30
    while not sql_client.writers_waiting(path) and time.monotonic() < deadline:
        time.sleep(0.005)
    return thread


def _setting(cursor, name: str) -> str:
    return str(cursor.execute(f"SELECT current_setting('{name}')").fetchall()[0][0])


def test_a_read_of_committed_rows_lends_the_turn_to_a_waiting_writer_and_sees_one_state(tmp_path):
    """While a workspace's run reads its metrics part, another thread of the process writes and commits: the
    read does not hold the file's one writer, sees the state it began with, and has a memory share of its own
    meanwhile. Mutation that fails it: the read kept in its own turn (the other writer waits for it, and the
    read's wait times out)."""
    path = tmp_path / "history.duckdb"
    with _turn(path) as conn:
        conn.execute("CREATE TABLE marks (n INTEGER)")
        conn.execute("INSERT INTO marks VALUES (1)")
        alone = _setting(conn, "memory_limit")
    reading, written = threading.Event(), threading.Event()

    def insert(conn) -> None:
        reading.wait(30)
        conn.execute("INSERT INTO marks VALUES (2)")
        written.set()

    def read(cursor) -> tuple[int, int, str]:
        before = cursor.execute("SELECT count(*) FROM marks").fetchall()[0][0]
        reading.set()
        wrote = written.wait(10)
        after = cursor.execute("SELECT count(*) FROM marks").fetchall()[0][0]
        return (before, after, _setting(cursor, "memory_limit")) if wrote else (-1, -1, "")

    with _turn(path) as conn:
        other = _another_writer_waits(path, insert)
        seen = conn.engine.read_committed(conn, read)
        assert conn.execute("SELECT count(*) FROM marks").fetchall()[0][0] == 2  # its turn is back, and current
        assert _setting(conn, "memory_limit") == alone
    other.join(30)
    assert seen[:2] == (1, 1)
    assert _mib(seen[2]) > _mib(alone)


def _mib(setting: str) -> float:
    number, unit = setting.split()
    return float(number) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit]


def test_a_read_with_no_writer_waiting_keeps_its_turn_and_the_one_memory_limit(tmp_path):
    """A read alone has no writer to make room for: it runs in its turn, under the one memory limit (a first
    sync of one large workspace stays within its peak). Mutation that fails it: a read lends its turn whether
    or not another writer waits."""
    path = tmp_path / "history.duckdb"
    with _turn(path) as conn:
        alone = _setting(conn, "memory_limit")
        assert conn.engine.read_committed(conn, lambda cursor: _setting(cursor, "memory_limit")) == alone


def test_a_read_beside_the_writer_that_runs_out_of_memory_is_read_again_in_the_turn(tmp_path, caplog):
    """The process's memory limit covers the writer and a read beside it: a read that runs out of it there is
    read again in the thread's own turn, and says so in one line, rather than failing the workspace's run.
    Mutation that fails it: the exception let through."""
    path = tmp_path / "history.duckdb"
    tries: list[bool] = []

    def read(cursor) -> int:
        tries.append(True)
        if len(tries) == 1:
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 1.0 MiB")
        return int(cursor.execute("SELECT 42").fetchall()[0][0])

    with _turn(path) as conn, caplog.at_level(logging.WARNING, logger="scanwatch.history"):
        other = _another_writer_waits(path)
        assert conn.engine.read_committed(conn, read) == 42
    other.join(30)
    assert len(tries) == 2
    assert [r.getMessage().split(";")[0] for r in caplog.records] == [
        f"a read beside the writer of {path} ran out of DuckDB's memory limit"]


def _cached_mib(conn) -> float:
    """What DuckDB's buffer pool of the process holds, every tag (the history's blocks among them)."""
    return float(conn.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()[0][0]) / 2**20


@pytest.mark.parametrize("unevictable", [False, True], ids=["alone", "beside-unevictable-index-entries"])
def test_a_turn_handed_to_a_waiting_writer_leaves_the_file_s_blocks_behind(tmp_path, unevictable):
    """The file stays attached while writers wait for it, and DuckDB kept every block a turn read, up to its
    memory limit: with a thousand workspaces the process's memory grew with the file though no turn needed more.
    The next writer finds the cache let go of and the limit as it was. Mutation that fails it: the cache kept
    across turns (the waiting writer finds the table's blocks still held).

    `unevictable`: index entries not yet checkpointed (a new history's schema, 3 MiB, as a first sync's own
    writes are) stay in memory, so DuckDB refuses the 1 MB limit; what it evicted before refusing is let go of
    all the same."""
    from pipelines.storage.destinations.impl.duckdb import sql_client

    path = tmp_path / "history.duckdb"
    with contextlib.ExitStack() as kept:
        if unevictable:
            kept.enter_context(_turn(tmp_path / "written.duckdb"))  # created, its indexes not checkpointed
        _hand_over_a_read(path, sql_client)


def _hand_over_a_read(path: Path, sql_client) -> None:
    with _turn(path) as conn:
        conn.execute("CREATE TABLE wide AS SELECT i, md5(i::VARCHAR) || md5((i + 1)::VARCHAR) AS s "
                     "FROM range(500000) t(i)")
        alone = _setting(conn, "memory_limit")
    found: list[tuple[float, str]] = []
    with _turn(path) as conn:
        # What the process held before the read: the pool is the process's, and a history another test of this
        # worker keeps attached holds blocks of its own (index entries not yet checkpointed cannot be evicted).
        before = _cached_mib(conn)
        # A scan, not an aggregate: a hash table of every value would push the blocks out as it read them.
        assert conn.execute("SELECT count(*) FROM wide WHERE s LIKE '%z%'").fetchall()[0][0] == 0
        read = _cached_mib(conn) - before
        other = _another_writer_waits(path, lambda next_conn: found.append(
            (_cached_mib(next_conn) - before, _setting(next_conn, "memory_limit"))))
    other.join(30)
    assert read > 4 * (sql_client.CACHE_KEPT_MB + 1)  # the table's blocks were cached while its turn read them
    assert found[0][0] <= sql_client.CACHE_KEPT_MB + 1
    assert found[0][1] == alone


def test_only_one_read_runs_beside_the_writer_at_a_time(tmp_path):
    """A second read while one runs beside the writer keeps its own turn: DuckDB then runs at most one writer
    and one reader at once. Mutation that fails it: every read lent its turn."""
    path = tmp_path / "history.duckdb"
    first_reading, second_done, third_got_it = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first(cursor) -> None:
        first_reading.set()
        second_done.wait(30)

    def holder() -> None:
        with _turn(path) as conn:
            _another_writer_waits(path, lambda conn: _second(conn))
            conn.engine.read_committed(conn, first)

    def _second(conn) -> None:  # the writer the holder lent its turn to reads too, while a third waits
        assert first_reading.wait(30)
        third = _another_writer_waits(path, lambda _conn: third_got_it.set())
        conn.engine.read_committed(conn, lambda cursor: seen.append(third_got_it.wait(0.5)))
        second_done.set()
        threads.append(third)

    threads: list[threading.Thread] = []
    thread = threading.Thread(target=holder)
    thread.start()
    thread.join(60)
    for t in threads:
        t.join(30)
    assert seen == [False] and third_got_it.is_set()


def test_the_process_s_duckdb_memory_by_tag_is_what_its_history_holds(tmp_path):
    """`Attached.memory_by_tag()` is how a benchmark sees what the writer, a read beside it and a checkpoint
    hold together (benchmarks/duckdb_peak.py). Mutations that fail it: a database of its own asked (it holds
    nothing), the spilled and held bytes swapped."""
    from pipelines.storage.destinations.impl.duckdb.sql_client import Attached

    with _turn(tmp_path / "history.duckdb") as conn:
        conn.execute("CREATE TABLE wide AS SELECT i, md5(i::VARCHAR) AS s FROM range(300000) t(i)")
        assert conn.execute("SELECT count(*) FROM wide WHERE s LIKE '%z%'").fetchall()[0][0] == 0
        tags = Attached.memory_by_tag()
        held = sum(used for used, _ in tags.values()) / 2**20
        assert held > 4
        assert abs(held - _cached_mib(conn)) < 2  # the same database: the one the connection's history is in
        assert all(spilled == 0 for _, spilled in tags.values())  # no temp directory was needed for 300k rows
