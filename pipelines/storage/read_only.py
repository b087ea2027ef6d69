"""The one read-only door to the history, for `scanwatch sql` and `pipelines.history` alike.

Read-only holds by construction: DuckDB opens the file read-only with external access off and its
configuration locked; the parsed statement must be a read (an EXPLAIN, which EXPLAIN ANALYZE runs, only of
a read); a time limit interrupts it. On PostgreSQL the server holds it (`pipelines/storage/postgres_read.py`).
Rows come a chunk at a time (`opened`), so a result of any size is never held whole. Every refusal is one
line the user can act on. DuckDB is imported only when a query runs.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pipelines.storage.engines import Connection

EXIT_ERROR = 1
EXIT_BUSY = 75  # EX_TEMPFAIL: the same command will work once the sync is done
_READ_TYPES = {"SELECT", "EXPLAIN"}  # SHOW, DESCRIBE, SUMMARIZE, FROM and VALUES parse as SELECT
# A PIVOT whose columns come from a query (`ON severity IN (SELECT severity FROM severities)`) parses as
# MULTI: DuckDB first makes an enum of the column names. It is a read when the statement itself is a query;
# `CREATE TABLE ... AS PIVOT` or `INSERT ... PIVOT` are MULTI too, and begin otherwise.
_QUERY_START = re.compile(r"^\s*(?:--[^\n]*\n\s*)*\(*\s*(SELECT|WITH|FROM|PIVOT|UNPIVOT)\b", re.IGNORECASE)
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(ANALYZE\s+)?", re.IGNORECASE)
T = TypeVar("T")
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 86400.0  # a day: PostgreSQL's statement_timeout stops at 24.8 days, and no read needs more
FETCH_ROWS = 1000
# Read as a role that could write (or a superuser) on purpose: `scanwatch sql --as-writer` sets it too.
AS_WRITER_VARIABLE = "SCANWATCH_SQL_AS_WRITER"
# How long a reader of a DuckDB file waits for a sync to release it. A sync holds the file for a merge or a
# snapshot at a time (seconds, docs/operations.md), so a reader that waits a little is served instead of refused.
DEFAULT_WAIT = 30.0
_FIRST_POLL, _LAST_POLL = 0.05, 0.5  # seconds between tries: quick at first, gentle on a long wait


class ReadRefused(Exception):
    """A condition the user can act on; the message is the whole output, no traceback, and `code` the exit
    status a command ends with."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def checked_timeout(timeout: float | None) -> float | None:
    """`--timeout` as a number of seconds the servers take, or one line saying which are."""
    if timeout is None:
        return None
    if math.isnan(timeout) or not 0 < timeout <= MAX_TIMEOUT:
        raise ReadRefused(f"--timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT:g} (a day); "
                          f"got {timeout:g}")
    return timeout


def execute_read_only(db: Path | str, sql: str, *, timeout: float | None = DEFAULT_TIMEOUT,
                      workspace: str | None = None, as_writer: bool = False, wait: float = DEFAULT_WAIT
                      ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Every row of one read statement (`opened`, collected)."""
    with opened(db, sql, timeout=timeout, workspace=workspace, as_writer=as_writer, wait=wait) as (columns, rows):
        return columns, list(rows)


@contextlib.contextmanager
def opened(db: Path | str, sql: str, *, timeout: float | None = DEFAULT_TIMEOUT, workspace: str | None = None,
           as_writer: bool = False, wait: float = DEFAULT_WAIT
           ) -> Iterator[tuple[list[str], Iterator[tuple[Any, ...]]]]:
    """One read statement's columns and its rows, fetched a chunk at a time while the block lasts; four locks
    hold: read-only file, statement type, no file access, time limit. With `workspace`, every table shows
    that workspace's rows only. `db` may be a PostgreSQL URL: the door of `pipelines/storage/postgres_read.py`
    keeps the same promise there, with the server, and refuses a role that could write unless `as_writer`.
    A DuckDB file a sync is writing is waited for up to `wait` seconds, then refused with the busy exit status."""
    timeout = checked_timeout(timeout)
    if not wait >= 0:
        raise ReadRefused(f"--wait must be a number of seconds, 0 or more (got {wait:g})")
    if isinstance(db, str) and not isinstance(db, Path):
        from pipelines.core.history_location import HistoryLocation

        location = HistoryLocation.parse(db)
        if location.is_postgres:
            with _on_postgres(location, sql, timeout, workspace, as_writer) as result:
                yield result
            return
        db = location.path
    if not db.is_file():
        raise ReadRefused(f"no history yet at {db}: run scanwatch sync")
    con = _open_waiting(db, wait)
    timer = threading.Timer(timeout, con.interrupt) if timeout is not None else None
    try:
        with _duckdb_errors(timeout):
            con.execute("SET TimeZone = 'UTC'")
            _check_schema(con, db)
            if workspace is not None:
                from pipelines.storage.workspace_scope import UnknownWorkspaceError, scope_to_workspace

                try:
                    scope_to_workspace(con, workspace)
                except UnknownWorkspaceError as exc:
                    raise ReadRefused(str(exc)) from None
            con.execute("SET lock_configuration = true")
            statement = _single_read_statement(con, sql)
            if timer is not None:
                timer.start()
            cursor = con.execute(statement)
            columns = [d[0] for d in cursor.description or []]
        yield columns, _duckdb_rows(cursor, timeout)
    finally:
        if timer is not None:
            timer.cancel()
        con.close()


@contextlib.contextmanager
def _duckdb_errors(timeout: float | None) -> Iterator[None]:
    import duckdb

    try:
        yield
    except duckdb.InterruptException:
        raise ReadRefused(f"the query ran longer than {timeout:g} s and was stopped; narrow it, or give "
                          "--timeout more seconds") from None
    except duckdb.Error as exc:
        raise ReadRefused(f"query failed: {_first_line(exc)}") from None


def _duckdb_rows(cursor: Any, timeout: float | None) -> Iterator[tuple[Any, ...]]:
    while True:
        with _duckdb_errors(timeout):
            chunk = cursor.fetchmany(FETCH_ROWS)
        if not chunk:
            return
        yield from chunk


def _open_waiting(db: Path, wait: float) -> Connection:
    """DuckDB's read-only connection to the file, as `while_locked` waits for it."""
    import duckdb

    from pipelines.storage.engines import DUCKDB, Connection

    return while_locked(db, wait, lambda: Connection(duckdb.connect(
        str(db), read_only=True, config={"enable_external_access": False, "autoload_known_extensions": False,
                                         "autoinstall_known_extensions": False}), DUCKDB))


def while_locked(db: Path, wait: float, attempt: Callable[[], T]) -> T:
    """`attempt()` (an open of the DuckDB file), tried again while a sync holds the file's lock, for up to
    `wait` seconds: DuckDB has no lock wait of its own (a locked file is an error at once). The one reader's
    wait of scanwatch: `scanwatch sql` and `scanwatch backup` both use it."""
    import duckdb

    deadline = time.monotonic() + wait
    pause = _FIRST_POLL
    while True:
        try:
            return attempt()
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise ReadRefused(f"cannot open {db}: {_first_line(exc)}") from None
            left = deadline - time.monotonic()
            if left <= 0:
                waited = f" for the {wait:g} s this command waited" if wait > 0 else ""
                raise ReadRefused(f"a sync is writing the history at {db}{waited}; try again in a moment, or "
                                  "give --wait more seconds", EXIT_BUSY) from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, _LAST_POLL)
        except duckdb.Error as exc:
            raise ReadRefused(f"cannot open {db}: {_first_line(exc)}") from None


def _check_schema(con: Connection, db: Path) -> None:
    """A history older than this code lacks tables and views the cookbook reads: say so, not DuckDB's
    catalog error. Only a sync may upgrade it (this door opens the file read-only)."""
    from pipelines.storage.db import latest_version, schema_version

    have, want = schema_version(con), latest_version()
    if 0 < have < want:  # 0: no migration table, a file scanwatch never wrote; it is read as it is
        raise ReadRefused(f"the history at {db} is at schema {have}, older than this scanwatch's {want}: run "
                          "scanwatch sync once to bring it up to date (every row is kept), then query it")


@contextlib.contextmanager
def _on_postgres(location: Any, sql: str, timeout: float | None, workspace: str | None, as_writer: bool
                 ) -> Iterator[tuple[list[str], Iterator[tuple[Any, ...]]]]:
    from pipelines.storage.postgres_read import Refused, opened

    try:
        with opened(location, sql, timeout=timeout, workspace=workspace, as_writer=as_writer) as (columns, rows):
            yield columns, _refusing(rows, Refused)
    except Refused as exc:
        raise ReadRefused(str(exc), EXIT_BUSY if exc.busy else EXIT_ERROR) from None


def _refusing(rows: Iterator[tuple[Any, ...]], refused: type[Exception]) -> Iterator[tuple[Any, ...]]:
    """The rows, a refusal met while fetching them (a time limit, a lost server) as ReadRefused."""
    try:
        yield from rows
    except refused as exc:
        raise ReadRefused(str(exc), EXIT_BUSY if getattr(exc, "busy", False) else EXIT_ERROR) from None


def _single_read_statement(con: Any, sql: str) -> str:
    statements = con.extract_statements(sql)
    if not statements:
        raise ReadRefused("nothing to run: give a cookbook name or a SELECT statement")
    if len(statements) > 1:
        raise ReadRefused(f"one statement at a time (got {len(statements)})")
    kind = _kind(statements[0])
    if kind == "MULTI" and _QUERY_START.match(statements[0].query):
        kind = "SELECT"
    if kind not in _READ_TYPES:
        raise ReadRefused(
            f"the history is read-only here: {kind} is refused; run SELECT, WITH, FROM, SHOW, DESCRIBE or EXPLAIN"
        )
    if kind == "EXPLAIN":
        # EXPLAIN ANALYZE runs what it explains: the explained statement must be a read too.
        inner = _EXPLAIN.sub("", statements[0].query, count=1)
        try:
            explained = con.extract_statements(inner)
        except Exception:  # any parse failure of the remainder: refuse rather than guess
            explained = []
        if len(explained) != 1 or _kind(explained[0]) != "SELECT":
            what = _kind(explained[0]) if len(explained) == 1 else "a statement scanwatch cannot check"
            raise ReadRefused(f"the history is read-only here: EXPLAIN of {what} is refused; EXPLAIN a "
                                  "SELECT instead")
    query: str = statements[0].query
    return query


def _kind(statement: Any) -> str:
    return str(statement.type).rsplit(".", 1)[-1]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
