"""The read-only door on a PostgreSQL history (`scanwatch sql`, `pipelines.history`): the server keeps the
promise, not scanwatch's reading of the text.

- One statement: the user's text goes to the server through the extended query protocol (psycopg's
  `stream`), whose parser refuses a second statement ("cannot insert multiple commands into a prepared
  statement") however the text is quoted, so nothing can follow the statement into the transaction.
- A read: the statement runs inside a READ ONLY transaction, with `statement_timeout` and `lock_timeout` (a
  reader never queues behind a migration), and the connection is closed after it: a lone `COMMIT` ends a
  transaction that wrote nothing, and nothing runs after it.
- The role is the boundary: before the statement runs, the door asks the server what its role could do
  beyond reading (`sql/engines/postgres/door_role.sql`: a superuser, the server-files roles, the owner of a history
  table or a role that may write one) and refuses in one line unless told to read as a writer
  (`as_writer`). What a reader role may execute is the recipe's business (`scanwatch roles`).
- `--workspace`: the transaction is opened READ WRITE (a role with `default_transaction_read_only` can still
  make temporary views), creates the temporary views of one workspace's rows (`workspace_scope.py`), then
  turns READ ONLY before the user's statement; the closed connection drops the views. It is a filter; the
  workspace role of `scanwatch roles --workspace` is the boundary.
- The lexer of `sqltext.py` only words refusals the server would make anyway (one statement, a read, no `$name`
  parameter): the user gets a line about their query rather than the server's error, and a text the lexer
  misreads still meets the protocol, the transaction and the role.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import errors

from pipelines.core.history_location import HistoryLocation
from pipelines.core.sqlfiles import read_sql
from pipelines.storage.destinations.base import Connection
from pipelines.storage.destinations.errors import EXIT_BUSY, EXIT_ERROR, HistoryUnavailableError, ReadRefused
from pipelines.storage.destinations.impl.postgres.errors import first_line
from pipelines.storage.destinations.impl.postgres.sqltext import UnterminatedError, split, words

READ_STARTS = {"select", "with", "values", "table", "show", "explain"}
EXPLAIN_OPTIONS = {"analyze", "analyse", "verbose", "costs", "settings", "buffers", "wal", "timing", "summary",
                   "format", "text", "xml", "json", "yaml", "true", "false", "on", "off"}
LOCK_TIMEOUT_MS = 2000
FETCH_ROWS = 1000  # rows the server sends at a time: a result of any size is never held whole
ROLE_FILE = "engines/postgres/door_role.sql"
AS_WRITER_HINT = "pass --as-writer (or set SCANWATCH_SQL_AS_WRITER=1) to read as it anyway"


class Refused(ReadRefused):
    """A read that cannot run; the message is one line, `busy` when the same command will work later."""

    def __init__(self, message: str, busy: bool = False) -> None:
        super().__init__(message, EXIT_BUSY if busy else EXIT_ERROR)


def courtesy_check(sql: str) -> str:
    """The one read statement of `sql`, or a friendly line for a refusal the server would make anyway.

    A courtesy, not the boundary: the door must hold with this replaced by a function that passes any text
    through, as a text the lexer misreads would pass (tests/postgres/test_door_boundary.py replaces it, which
    is why it has a public name)."""
    try:
        statements = split(sql)
    except UnterminatedError as exc:
        raise Refused(f"query failed: {exc}") from None
    if not statements:
        raise Refused("nothing to run: give a cookbook name or a SELECT statement")
    if len(statements) > 1:
        raise Refused(f"one statement at a time (got {len(statements)})")
    statement = statements[0].query
    found = words(statement)
    kind = found[0].upper() if found else ""
    if not found or found[0] not in READ_STARTS:
        raise Refused(f"the history is read-only here: {kind or 'that statement'} is refused; run SELECT, WITH, "
                      "VALUES, TABLE, SHOW or EXPLAIN")
    if found[0] == "explain":
        inner = [w for w in found[1:] if w not in EXPLAIN_OPTIONS]
        if not inner or inner[0] not in READ_STARTS - {"explain", "show"}:
            what = inner[0].upper() if inner else "a statement scanwatch cannot check"
            raise Refused(f"the history is read-only here: EXPLAIN of {what} is refused; EXPLAIN a SELECT instead")
    if statements[0].named_parameters:
        raise Refused(f"query failed: ${statements[0].named_parameters[0]} is a parameter, and scanwatch sql "
                      "takes none: write the value")
    return statement


def _check_role(conn: Connection) -> None:
    """Refuse a role that could do more than read the history: the door is no boundary for it."""
    user, superuser, server_roles, owned, writable = conn.execute(read_sql(ROLE_FILE)).fetchall()[0]
    found = []
    if superuser:  # a member of every role and the owner of everything: that says it all
        found.append("a superuser")
    elif server_roles:
        found.append("a member of " + ", ".join(server_roles))
    if owned:
        found.append(f"the owner of {_some(owned)}")
    elif writable:
        found.append(f"allowed to write {_some(writable)}")
    if found:
        raise Refused(f"the role {user!r} of SCANWATCH_DB is {'; '.join(found)}: scanwatch sql reads as a role "
                      f"that can only read (docs/postgres.md, Roles: scanwatch roles prints the recipe), or "
                      f"{AS_WRITER_HINT}")


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more tables" if len(names) > 3 else "")


def _scope(conn: Any, workspace: str, scope: Callable[[Any, str], None]) -> None:
    """The temporary views of one workspace's rows (`scope`), made before the transaction turns read-only."""
    try:
        scope(conn, workspace)
    except errors.InsufficientPrivilege as exc:
        raise Refused(f"--workspace shows one workspace through temporary views, and the role of SCANWATCH_DB may "
                      f"not create them ({first_line(exc, conn.location)}): grant it TEMPORARY on the "
                      "database") from None


def _begin(conn: Connection, workspace: str | None) -> None:
    raw = conn.raw
    if workspace is None:
        raw.execute("BEGIN TRANSACTION READ ONLY")
        return
    try:
        # READ WRITE for the temporary views alone: a role whose default is read-only may still make them.
        raw.execute("BEGIN TRANSACTION READ WRITE")
    except psycopg.Error:
        raise Refused("--workspace needs a server that takes temporary views: this one only reads (a hot standby); "
                      "point SCANWATCH_DB at the primary, or add WHERE workspace_id = '...' to the query") from None


@contextlib.contextmanager
def _translated(location: HistoryLocation, timeout: float | None, raw: Any) -> Iterator[None]:
    """Every error of the door as one line the user can act on."""
    try:
        yield
    except ReadRefused:
        raise
    except errors.QueryCanceled:
        raise Refused(f"the query ran longer than {timeout:g} s and was stopped; narrow it, or give --timeout "
                      "more seconds") from None
    except errors.LockNotAvailable:
        raise Refused("a sync is changing the history's schema; try again in a moment", busy=True) from None
    except errors.ReadOnlySqlTransaction as exc:
        raise Refused(f"the history is read-only here: {first_line(exc, location)}") from None
    except errors.InsufficientPrivilege as exc:
        raise Refused(f"the history is read-only here: {first_line(exc, location)} (the role of SCANWATCH_DB may "
                      "only read)") from None
    except errors.SyntaxError as exc:
        raise Refused(f"query failed: {first_line(exc, location)} (scanwatch sql runs one statement at a "
                      "time)" if "multiple commands" in str(exc) else f"query failed: {first_line(exc, location)}"
                      ) from None
    except psycopg.OperationalError as exc:
        if raw.closed or raw.broken:
            raise Refused(f"lost the PostgreSQL server of the history at {location.masked}: "
                          f"{first_line(exc, location)}") from None
        raise Refused(f"query failed: {first_line(exc, location)}") from None
    except psycopg.ProgrammingError as exc:
        if "didn't produce a result" in str(exc):
            raise Refused("the statement returned no rows: scanwatch sql runs reads (SELECT, WITH, VALUES, TABLE, "
                          "SHOW, EXPLAIN)") from None
        raise Refused(f"query failed: {first_line(exc, location)}") from None
    except psycopg.Error as exc:
        raise Refused(f"query failed: {first_line(exc, location)}") from None


def _columns(raw: Any, statement: str) -> list[str]:
    """The column names of a statement that returned no row (the stream names them with its first row):
    the server describes it without running it, and the unnamed prepared statement is one statement too."""
    pgconn = raw.pgconn
    prepared = pgconn.prepare(b"", statement.encode())
    if prepared.status != psycopg.pq.ExecStatus.COMMAND_OK:
        return []
    described = pgconn.describe_prepared(b"")
    return [(described.fname(i) or b"").decode() for i in range(described.nfields)]


@contextlib.contextmanager
def opened(location: HistoryLocation, sql: str, *, timeout: float | None, workspace: str | None = None,
           as_writer: bool = False, scope: Callable[[Any, str], None],
           connect: Callable[[HistoryLocation], Any]) -> Iterator[tuple[list[str], Iterator[tuple[Any, ...]]]]:
    """The columns of one read statement and its rows as the server sends them, FETCH_ROWS at a time, in a
    READ ONLY transaction; with `workspace`, every table and view of the history shows that workspace's rows
    (`scope` makes its temporary views). `connect` opens a reader's connection (the engine's).
    The connection is closed when the block ends, whatever the statement did."""
    statement = courtesy_check(sql)
    try:
        conn = connect(location)
    except HistoryUnavailableError as exc:
        raise Refused(str(exc)) from None
    raw = conn.raw
    try:
        with _translated(location, timeout, raw):
            _begin(conn, workspace)
            if not as_writer:
                _check_role(conn)
            raw.execute("RESET work_mem")  # the role's own (the recipe's), not a writer's merge budget
            if timeout is not None:
                raw.execute(f"SET LOCAL statement_timeout = {max(1, round(timeout * 1000))}")
            raw.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
            if workspace is not None:
                _scope(conn, workspace, scope)
                raw.execute("SET TRANSACTION READ ONLY")
            cursor = psycopg.Cursor(raw)
            chunked = psycopg.capabilities.has_stream_chunked()
            stream = cursor.stream(statement, size=FETCH_ROWS if chunked else 1)
            first = next(stream, None)
            columns = [d.name for d in cursor.description] if cursor.description else _columns(raw, statement)
        yield columns, _rows(first, stream, location, timeout, raw)
    finally:
        conn.close()  # never a statement after the user's: the server rolls back what is open


def _rows(first: tuple[Any, ...] | None, stream: Iterator[tuple[Any, ...]], location: HistoryLocation,
          timeout: float | None, raw: Any) -> Iterator[tuple[Any, ...]]:
    if first is None:
        return
    yield first
    with _translated(location, timeout, raw):
        yield from stream
