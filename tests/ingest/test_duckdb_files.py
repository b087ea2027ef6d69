"""A DuckDB history file is attached to the process's one in-memory DuckDB while connections use it
(pipelines/storage/destinations/impl/duckdb/sql_client.py): it must hold DuckDB's file lock exactly as long as
a connection of its own would, and several files open in one process must never see each other's tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipelines.core.sqlfiles import read_sql
from pipelines.storage import connect
from pipelines.storage import db as storage_db
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
