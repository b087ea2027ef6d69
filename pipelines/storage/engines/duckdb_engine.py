"""DuckDB, the single-machine history: one file, one writer at a time, the SQL files' own dialect."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.engines.base import Capabilities, Connection, Engine
from pipelines.storage.engines.sqltext import Statement
from pipelines.storage.stage import NDJSON, StageFile

# A sync's memory is bounded by its merge group (see merge.CHUNK_BYTES), not by the history: DuckDB spills to
# `<db>.tmp` past this limit instead of growing with the workspace. 96 MB holds a merge group's stage tables
# and the snapshot's aggregates; the issue tables carry no index that would have to fit in it as the history
# grows (migration 011). One thread: scanwatch shares its host, and single-threaded DuckDB keeps one buffer
# set instead of one per thread. Insertion order is never relied on (every read that cares says ORDER BY),
# and keeping it costs memory in large loads.
SETTINGS = {"memory_limit": "96MB", "threads": 1, "preserve_insertion_order": False}


class HistoryLockedError(RuntimeError):
    """Another process holds the DuckDB file for writing (a sync or `dagster dev` run)."""


def _waiting_for_writer(path: Path, wait_seconds: float, open_once: Callable[[], Connection]) -> Connection:
    """`open_once()`, again every 0.5 s while another process holds the file's lock, for up to `wait_seconds`;
    then one line saying who holds it."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return open_once()
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                raise HistoryLockedError(
                    f"the history {path} is being written by another process (a sync or a Dagster run); "
                    "wait for it to finish and try again"
                ) from None
            time.sleep(0.5)


class DuckDBEngine(Engine):
    name = "duckdb"
    capabilities = Capabilities(single_writer=True, casts_can_fail=False, analyse_context=False)
    conflicts = (duckdb.TransactionException,)
    missing_table = (duckdb.CatalogException,)

    def open(self, path: str | Path, *, wait_seconds: float = 30.0) -> Connection:
        """A read-write connection; waits a while for another process's writer, then says who."""
        path = Path(path)
        if str(path) == ":memory:":
            raw = duckdb.connect(":memory:")
            _configure(raw)
            raw.execute("SET TimeZone = 'UTC'")
            return Connection(raw, self, HistoryLocation(":memory:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return _waiting_for_writer(path, wait_seconds, lambda: _Attached.open(path, self))

    def open_read_only(self, path: str | Path, *, wait_seconds: float = 0.0) -> Connection:
        """A read-only connection; a file another process is writing is waited for as `open` waits."""
        def once() -> Connection:
            raw = duckdb.connect(str(path), read_only=True)
            raw.execute("SET TimeZone = 'UTC'")
            return Connection(raw, self, HistoryLocation(str(path)))

        return _waiting_for_writer(Path(path), wait_seconds, once)

    def split(self, raw: Any, sql: str) -> Sequence[Statement]:
        return [Statement(s.query, tuple(s.named_parameters)) for s in raw.extract_statements(sql)]

    def execute(self, conn: Connection, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> Any:
        return conn.raw.execute(sql, params) if params is not None else conn.raw.execute(sql)

    def load_stage(self, conn: Connection, table: str, columns: Sequence[str], stages: Sequence[StageFile]) -> None:
        if any(stage.format is not NDJSON for stage in stages):
            raise ValueError("DuckDB loads NDJSON stage files only: write them in the engine's stage_format()")
        files = [stage.path for stage in stages]
        *text, seq = columns
        spec = "{" + ", ".join(f"'{c}': 'VARCHAR'" for c in text) + f", '{seq}': 'BIGINT'" + "}"
        conn.execute(f"INSERT INTO {table} SELECT * FROM read_json(?, format='newline_delimited', columns={spec})",
                     [[str(f) for f in files]])

    def cast(self, expression: str, sql_type: str, *, catching: bool = True) -> str:
        if sql_type == "INTEGER":
            # DuckDB's cast rounds `12.5` to an INTEGER 13: a line or a count that is not a whole number is
            # kept out (NULL) and warned about instead.
            as_double = f"TRY_CAST({expression} AS DOUBLE)"
            return f"CASE WHEN {as_double} = trunc({as_double}) THEN TRY_CAST({expression} AS INTEGER) END"
        return f"TRY_CAST({expression} AS {sql_type})"

    def row_hash(self, columns: str) -> str:
        return f"hash({columns})"

    @contextmanager
    def session(self, conn: Connection) -> Iterator[Connection]:
        """A cursor: DuckDB's second connection to the same database, with transactions of its own."""
        cursor = Connection(conn.raw.cursor(), self, conn.location)
        database = conn.raw.execute("SELECT current_database()").fetchall()[0][0]
        cursor.raw.execute(f'USE "{database}"')  # a new cursor starts in the process's own in-memory database
        cursor.raw.execute("SET TimeZone = 'UTC'")
        try:
            yield cursor
        finally:
            cursor.close()


def _configure(raw: duckdb.DuckDBPyConnection) -> None:
    for name, value in SETTINGS.items():
        raw.execute(f"SET {name} = '{value}'")


class _Attached(Connection):
    """A history file attached to this process's one in-memory DuckDB for as long as a connection uses it.

    Each new DuckDB database costs tens of milliseconds to create and to close (its catalog of built-in
    functions), and a sync opens the history several times per step, so that a merge never holds the file
    while the step waits on the service. Attaching the file to a database kept for the process costs a
    fraction of that, and takes and releases DuckDB's file lock as a connection of its own would: the file is
    detached (checkpointed, its lock released) when its last connection of the process closes.
    """

    _host: duckdb.DuckDBPyConnection | None = None
    _host_pid = 0
    _files: dict[str, list[Any]] = {}  # resolved path -> [alias, connections open]
    _lock = threading.Lock()
    _count = 0
    _key = ""
    _closed = False

    @classmethod
    def open(cls, path: Path, engine: DuckDBEngine) -> _Attached:
        key = str(path.resolve())
        with cls._lock:
            host = cls._host_here(path)
            entry = cls._files.get(key)
            if entry is None:
                cls._count += 1
                alias = f"history_{cls._count}"
                host.execute(f"ATTACH '{_quoted(str(path))}' AS {alias}")
                entry = cls._files[key] = [alias, 0]
            entry[1] += 1
        try:
            raw = host.cursor()
            raw.execute(f"USE {entry[0]}")
            raw.execute("SET TimeZone = 'UTC'")
        except BaseException:
            cls._release(key)
            raise
        conn = cls(raw, engine, HistoryLocation(str(path)))
        conn._key = key
        return conn

    @classmethod
    def _host_here(cls, first: Path) -> duckdb.DuckDBPyConnection:
        """The process's database; a forked child makes its own (the parent's is the parent's). Its spill
        folder is the first history's `<file>.tmp`, as that file's own database would have used."""
        if cls._host is None or cls._host_pid != os.getpid():
            host = duckdb.connect(":memory:")
            _configure(host)
            host.execute(f"SET temp_directory = '{_quoted(str(first) + '.tmp')}'")
            cls._host, cls._host_pid, cls._files = host, os.getpid(), {}
        return cls._host

    @classmethod
    def _release(cls, key: str) -> None:
        with cls._lock:
            entry = cls._files.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                del cls._files[key]
                assert cls._host is not None  # a file is attached to the host only
                cls._host.execute(f"DETACH {entry[0]}")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.raw.close()
        finally:
            self._release(self._key)


def _quoted(text: str) -> str:
    return text.replace("'", "''")


DUCKDB = DuckDBEngine()

_WRITERS: dict[str, threading.RLock] = {}
_WRITERS_LOCK = threading.Lock()


@contextmanager
def file_writer(path: str | Path) -> Iterator[None]:
    """DuckDB's file lock keeps other processes out, but connections of one process share the database, so
    threads of one process (several workspaces synced at once) take turns on a lock of their own too."""
    key = str(Path(path).resolve()) if str(path) != ":memory:" else ":memory:"
    with _WRITERS_LOCK:
        lock = _WRITERS.setdefault(key, threading.RLock())
    with lock:
        yield
