"""The read-only door on a PostgreSQL history (`scanwatch sql`, `pipelines.history`): the same promise as on
DuckDB, kept with PostgreSQL's own means.

- One statement, and a read: it must begin with SELECT, WITH, VALUES, TABLE, SHOW or EXPLAIN (of a read).
  COPY (to or from a PROGRAM), SET ROLE, SET SESSION AUTHORIZATION, DO and every write begin otherwise.
- No file or server-side access and no dynamic SQL: the functions that read server files, large objects,
  other databases (dblink), settings, signals, advisory locks or run a query given as text are refused by
  name, wherever they appear (quoted, schema-qualified).
- The server checks it again: the query runs in a READ ONLY transaction that is rolled back, with a
  statement timeout, a lock timeout (a reader never queues behind a migration) and an idle timeout. MVCC
  means it never waits for a sync's merge, and a sync never waits for it.
- `--workspace`: the transaction first creates the temporary views of one workspace's rows
  (`workspace_scope.py`), then turns READ ONLY before the user's statement runs (PostgreSQL lets a transaction
  become read-only at any point, never the reverse); the rollback drops the views with it.
- The role does the rest: give readers a role that can only SELECT (docs/operations.md), so even a function
  this list does not know can do no more than read.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg
from psycopg import errors

from pipelines.history_location import HistoryLocation
from pipelines.storage.engines.base import HistoryUnavailableError
from pipelines.storage.engines.postgres_engine import POSTGRES
from pipelines.storage.engines.sqltext import UnterminatedError, split, words

READ_STARTS = {"select", "with", "values", "table", "show", "explain"}
EXPLAIN_OPTIONS = {"analyze", "analyse", "verbose", "costs", "settings", "buffers", "wal", "timing", "summary",
                   "format", "text", "xml", "json", "yaml", "true", "false", "on", "off"}
# Functions no reader needs: server files, large objects, other databases, settings and roles, signals,
# advisory locks (a reader holding a workspace's lock would stop its syncs), administration, and the ones
# that run a query given as text (which would carry any of the others past this list).
REFUSED = {
    "pg_read_file", "pg_read_binary_file", "pg_stat_file", "pg_ls_dir", "pg_file_write", "pg_file_rename",
    "pg_file_unlink", "pg_logdir_ls", "lo_import", "lo_export", "lo_get", "lo_put", "lo_create", "lo_creat",
    "lo_open", "lo_unlink", "lo_from_bytea", "loread", "lowrite", "set_config", "pg_reload_conf",
    "pg_rotate_logfile", "pg_terminate_backend", "pg_cancel_backend", "pg_promote", "pg_switch_wal",
    "pg_create_restore_point", "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema",
    "cursor_to_xml", "cursor_to_xmlschema", "ts_stat", "ts_rewrite", "pg_import_system_collations",
}
REFUSED_PREFIXES = ("dblink", "pg_ls_", "pg_advisory", "pg_try_advisory", "pg_backup", "pg_start_backup",
                    "pg_stop_backup", "pg_replication_", "pg_create_", "pg_drop_", "pg_copy_", "pg_logical_",
                    "pg_wal_replay", "lo_")
LOCK_TIMEOUT_MS = 2000


class Refused(Exception):
    """A read that cannot run; the message is one line, `busy` when the same command will work later."""

    def __init__(self, message: str, busy: bool = False) -> None:
        super().__init__(message)
        self.busy = busy


def _check(sql: str) -> str:
    """The one read statement of `sql`, or why it is refused."""
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
    for word in found:
        if word in REFUSED or word.startswith(REFUSED_PREFIXES):
            raise Refused(f"the history is read-only here: {word} is refused (no file, server-side or role access "
                          "from scanwatch sql)")
    if statements[0].named_parameters:
        raise Refused(f"query failed: ${statements[0].named_parameters[0]} is a parameter, and scanwatch sql "
                      "takes none: write the value")
    return statement


def _scope(conn: Any, workspace: str) -> None:
    """The temporary views of one workspace's rows, made before the transaction turns read-only."""
    from pipelines.workspace_scope import UnknownWorkspaceError, scope_to_workspace

    try:
        scope_to_workspace(conn, workspace)
    except UnknownWorkspaceError as exc:
        raise Refused(str(exc)) from None
    except errors.ReadOnlySqlTransaction:
        raise Refused("--workspace needs a server that takes temporary views: this one only reads (a hot standby); "
                      "point SCANWATCH_DB at the primary, or add WHERE workspace_id = '...' to the query") from None
    except errors.InsufficientPrivilege as exc:
        raise Refused(f"--workspace shows one workspace through temporary views, and the role of SCANWATCH_DB may "
                      f"not create them ({_first_line(exc, conn.location)}): grant it TEMPORARY on the "
                      "database") from None


def _first_line(exc: BaseException, location: HistoryLocation) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return location.scrub(lines[0] if lines else type(exc).__name__)


def execute(location: HistoryLocation, sql: str, *, timeout: float | None,
            workspace: str | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one read statement in a READ ONLY transaction that is rolled back; with `workspace`, every table
    and view of the history shows that workspace's rows."""
    statement = _check(sql)
    try:
        conn = POSTGRES.open(location, writer=False)
    except HistoryUnavailableError as exc:
        raise Refused(str(exc)) from None
    raw = conn.raw
    try:
        raw.execute("BEGIN" if workspace is not None else "BEGIN TRANSACTION READ ONLY")
        if timeout is not None:
            raw.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout * 1000))}")
        raw.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
        if workspace is not None:
            _scope(conn, workspace)
            raw.execute("SET TRANSACTION READ ONLY")
        cursor = raw.execute(statement)
        columns = [d[0] for d in cursor.description or []]
        return columns, cursor.fetchall()
    except errors.QueryCanceled:
        raise Refused(f"the query ran longer than {timeout:g} s and was stopped; narrow it, or give --timeout "
                      "more seconds") from None
    except errors.LockNotAvailable:
        raise Refused("a sync is changing the history's schema; try again in a moment", busy=True) from None
    except errors.ReadOnlySqlTransaction as exc:
        raise Refused(f"the history is read-only here: {_first_line(exc, location)}") from None
    except errors.InsufficientPrivilege as exc:
        raise Refused(f"query failed: {_first_line(exc, location)} (the role of SCANWATCH_DB may only read)") from None
    except psycopg.OperationalError as exc:
        if raw.closed or raw.broken:
            raise Refused(f"lost the PostgreSQL server of the history at {location.masked}: "
                          f"{_first_line(exc, location)}") from None
        raise Refused(f"query failed: {_first_line(exc, location)}") from None
    except psycopg.Error as exc:
        raise Refused(f"query failed: {_first_line(exc, location)}") from None
    finally:
        if not (raw.closed or raw.broken):
            with contextlib.suppress(psycopg.Error):
                raw.execute("ROLLBACK")
        conn.close()
