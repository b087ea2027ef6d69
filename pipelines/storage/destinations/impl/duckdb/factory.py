"""DuckDB, the single-machine history: one file, one writer at a time, the SQL files' own dialect."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.base import Capabilities, Connection, Engine, ReadResult, Statement
from pipelines.storage.destinations.errors import HistoryError
from pipelines.storage.destinations.impl.duckdb.errors import CONFLICTS, MISSING_TABLE, mapped, waiting_for_writer
from pipelines.storage.destinations.impl.duckdb.sql_client import (
    Attached,
    beside_the_writer,
    configure,
    create_whole,
    file_writer,
)
from pipelines.storage.destinations.stage_format import NDJSON, StagedFile

if TYPE_CHECKING:
    from pipelines.snapshot.format import Limits
    from pipelines.snapshot.store import SnapshotStore

T = TypeVar("T")
_log = logging.getLogger("scanwatch.history")


class DuckDBEngine(Engine):
    name = "duckdb"
    sql_folder = "engines/duckdb"
    capabilities = Capabilities(single_writer=True, casts_can_fail=False, analyse_context=False)
    conflicts = CONFLICTS
    missing_table = MISSING_TABLE

    def open(self, path: str | Path, *, wait_seconds: float = 30.0) -> Connection:
        """A read-write connection; waits a while for another process's writer, then says who."""
        path = Path(path)
        if str(path) == ":memory:":
            raw = duckdb.connect(":memory:")
            configure(raw)
            raw.execute("SET TimeZone = 'UTC'")
            return Connection(raw, self, HistoryLocation(":memory:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        create_whole(path)
        return waiting_for_writer(path, wait_seconds, lambda: Attached.open(path, self))

    def open_read_only(self, path: str | Path, *, wait_seconds: float = 0.0) -> Connection:
        """A read-only connection; a file another process is writing is waited for as `open` waits."""
        def once() -> Connection:
            raw = duckdb.connect(str(path), read_only=True)
            raw.execute("SET TimeZone = 'UTC'")
            return Connection(raw, self, HistoryLocation(str(path)))

        return waiting_for_writer(Path(path), wait_seconds, once)

    def connect(self, location: HistoryLocation, *, wait_seconds: float = 30.0) -> Connection:
        return self.open(location.path, wait_seconds=wait_seconds)

    def connect_reader(self, location: HistoryLocation, *, wait_seconds: float = 0.0) -> Connection:
        return self.open_read_only(location.path, wait_seconds=wait_seconds)

    def exists(self, location: HistoryLocation) -> bool:
        return location.path.is_file()

    @contextmanager
    def mapped(self, conn: Connection) -> Iterator[None]:
        with mapped(conn.label):
            yield

    def polled_snapshot(self, location: HistoryLocation, limits: Limits | None = None) -> SnapshotStore:
        """A DuckDB history keeps no snapshot inside its file: one writer holds the file, and the exporter reads
        the folder of parts beside it."""
        raise HistoryError(f"the DuckDB history at {location.masked} holds no metrics snapshot: its snapshot is the "
                           "folder beside it; serve that folder (--snapshot, SCANWATCH_SNAPSHOT)")

    def writer_turns(self, location: HistoryLocation) -> contextlib.AbstractContextManager[None]:
        return file_writer(location.path)

    def read_only(self, location: HistoryLocation, sql: str, *, timeout: float | None, workspace: str | None,
                  as_writer: bool, wait: float, scope: Callable[[Any, str], None],
                  check_schema: Callable[[Any], None]) -> contextlib.AbstractContextManager[ReadResult]:
        from pipelines.storage.destinations.impl.duckdb.read_door import opened

        return opened(location.path, sql, timeout=timeout, workspace=workspace, wait=wait, scope=scope,
                      check_schema=check_schema)

    def backup(self, location: HistoryLocation, dest: Path, *, wait: float) -> str:
        from pipelines.storage.destinations.impl.duckdb.backup import copy

        copy(location.path, dest, wait)
        return "DuckDB file"

    def restore(self, location: HistoryLocation, backup: Path, *, replace: bool, wait: float,
                schema: Callable[[Any], int], newest: int) -> None:
        from pipelines.storage.destinations.impl.duckdb.backup import restore

        restore(location.path, backup, replace, wait, schema, newest)

    def split(self, raw: Any, sql: str) -> Sequence[Statement]:
        return [Statement(s.query, tuple(s.named_parameters)) for s in raw.extract_statements(sql)]

    def execute(self, conn: Connection, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> Any:
        return conn.raw.execute(sql, params) if params is not None else conn.raw.execute(sql)

    def load_stage(self, conn: Connection, table: str, columns: Sequence[str], stages: Sequence[StagedFile]) -> None:
        if any(stage.format is not NDJSON for stage in stages):
            raise ValueError("DuckDB loads NDJSON stage files only: write them in the engine's stage_format()")
        files = [stage.path for stage in stages]
        *text, seq = columns
        spec = "{" + ", ".join(f"'{c}': 'VARCHAR'" for c in text) + f", '{seq}': 'BIGINT'" + "}"
        conn.execute(f"INSERT INTO {table} SELECT * FROM read_json($files, format='newline_delimited', "
                     f"columns={spec})", {"files": [str(f) for f in files]})

    def cast(self, expression: str, sql_type: str, *, catching: bool = True) -> str:
        if sql_type == "INTEGER":
            # DuckDB's cast rounds `12.5` to an INTEGER 13: a line or a count that is not a whole number is
            # kept out (NULL) and warned about instead.
            as_double = f"TRY_CAST({expression} AS DOUBLE)"
            return f"CASE WHEN {as_double} = trunc({as_double}) THEN TRY_CAST({expression} AS INTEGER) END"
        return f"TRY_CAST({expression} AS {sql_type})"

    def row_hash(self, columns: str) -> str:
        return f"hash({columns})"

    def read_committed(self, conn: Connection, work: Callable[[Connection], T], *, beside: bool = True) -> T:
        """Beside the writer: the thread lends its turn to the others while it reads (DuckDB's transactions
        give the read its own committed state), so a refresh of many workspaces has one writing and one
        reading at a time instead of one statement at a time. The process's one memory limit covers both: a
        read that runs out of it beside a writer is read again in the thread's own turn, as every read was."""
        with beside_the_writer(conn.location.path) if beside else contextlib.nullcontext(False) as lent:
            if lent:
                try:
                    return super().read_committed(conn, work)
                except duckdb.OutOfMemoryException as exc:
                    _log.warning("a read beside the writer of %s ran out of DuckDB's memory limit; read again in "
                                 "the writer's turn: %s", conn.location.masked, str(exc).splitlines()[0])
        return super().read_committed(conn, work)

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


DUCKDB = DuckDBEngine()
