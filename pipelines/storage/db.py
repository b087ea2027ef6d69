"""Opening the history and carrying its schema forward.

Migrations are numbered `.sql` files applied in order, each in its own transaction and recorded in
`schema_migrations`, so an existing history is upgraded in place the first time a newer scanwatch opens it.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from pipelines.sqlfiles import read_sql, sql_dir, transaction
from pipelines.storage.reference import write_vocabulary
from pipelines.storage.views import drop_views, write_views

_MIGRATION = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


# A sync's memory is bounded by its merge group (see merge.CHUNK_BYTES), not by the history: DuckDB spills to
# `<db>.tmp` past this limit instead of growing with the workspace. 96 MB holds a merge group's stage tables
# and the snapshot's aggregates; the issue tables carry no index that would have to fit in it as the history
# grows (migration 011). One thread: scanwatch shares its host, and single-threaded DuckDB keeps one buffer
# set instead of one per thread. Insertion order is never relied on (every read that cares says ORDER BY),
# and keeping it costs memory in large loads.
SETTINGS = {"memory_limit": "96MB", "threads": 1, "preserve_insertion_order": False}


class HistoryLockedError(RuntimeError):
    """Another process holds the DuckDB file for writing (a sync or `dagster dev` run)."""


def _migrations() -> list[tuple[int, str]]:
    found = []
    for path in sorted((sql_dir() / "migrations").iterdir()):
        m = _MIGRATION.match(path.name)
        if m:
            found.append((int(m.group(1)), path.name))
    return found


def latest_version() -> int:
    """The schema version this code reads and writes: its newest migration."""
    return _migrations()[-1][0]


def schema_version(conn: duckdb.DuckDBPyConnection) -> int:
    if not _has_table(conn, "schema_migrations"):
        return 0
    return conn.execute(read_sql("storage/schema_version.sql")).fetchall()[0][0]


def migrate(conn: duckdb.DuckDBPyConnection, *, target: int | None = None) -> list[int]:
    """Apply the migrations this history lacks (up to `target`); returns the versions applied."""
    conn.execute(read_sql("storage/schema_migrations.sql"))
    current = schema_version(conn)
    applied = []
    for version, name in _migrations():
        if version <= current or (target is not None and version > target):
            continue
        if not applied and _has_table(conn, "view_layer"):  # a table a view reads may change: views go first
            with transaction(conn):
                drop_views(conn)
        with transaction(conn, "migrate"):
            conn.execute(read_sql(f"migrations/{name}"))
            conn.execute(read_sql("storage/record_migration.sql"), {"version": version, "name": name})
        applied.append(version)
    if _has_table(conn, "severities"):  # a history at schema 3 or later (a test may stop before)
        # Written only when it differs (after an upgrade). Another connection of this process (a second
        # workspace's step) may write the same definition at that moment; its copy is this one, so a
        # conflict leaves nothing to redo.
        with contextlib.suppress(duckdb.TransactionException):
            write_vocabulary(conn)
    if _has_table(conn, "view_layer") and (target is None or target >= _migrations()[-1][0]):
        with contextlib.suppress(duckdb.TransactionException):  # the same race, for the views layer
            write_views(conn)
    return applied


def _has_table(conn: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(conn.execute(read_sql("storage/table_exists.sql"), {"name": name}).fetchall()[0][0])


def connect(path: str | Path, *, wait_seconds: float = 30.0) -> duckdb.DuckDBPyConnection:
    """A read-write connection with the schema current; waits a while for another writer, then says who."""
    path = Path(path)
    if str(path) != ":memory:":
        path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            conn = duckdb.connect(str(path))
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                raise HistoryLockedError(
                    f"the history {path} is being written by another process (a sync or a Dagster run); "
                    "wait for it to finish and try again"
                ) from None
            time.sleep(0.5)
    conn.execute("SET TimeZone = 'UTC'")
    for name, value in SETTINGS.items():
        conn.execute(f"SET {name} = '{value}'")
    migrate(conn)
    return conn


_WRITERS: dict[str, threading.RLock] = {}
_WRITERS_LOCK = threading.Lock()


@contextmanager
def writer(path: str | Path, *, wait_seconds: float = 30.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """The history's single writer, for one read or merge, then released.

    DuckDB's file lock keeps other processes out, but connections of one process share the database, so
    threads of one process (several workspaces synced at once) take turns on a lock of their own too.
    """
    key = str(Path(path).resolve()) if str(path) != ":memory:" else ":memory:"
    with _WRITERS_LOCK:
        lock = _WRITERS.setdefault(key, threading.RLock())
    with lock:
        conn = connect(path, wait_seconds=wait_seconds)
        try:
            yield conn
        finally:
            conn.close()
