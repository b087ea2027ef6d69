"""The read-only door on a DuckDB history (`scanwatch sql`, `pipelines.history`).

Read-only holds by construction: DuckDB opens the file read-only with external access off and its
configuration locked; the parsed statement must be a read (an EXPLAIN, which EXPLAIN ANALYZE runs, only of
a read); a time limit interrupts it. DuckDB's own parser (`extract_statements`) says what a statement is.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb

from pipelines.storage.destinations.base import ReadResult
from pipelines.storage.destinations.errors import ReadRefused, first_line
from pipelines.storage.destinations.impl.duckdb.errors import while_locked

_READ_TYPES = {"SELECT", "EXPLAIN"}  # SHOW, DESCRIBE, SUMMARIZE, FROM and VALUES parse as SELECT
# A PIVOT whose columns come from a query (`ON severity IN (SELECT severity FROM severities)`) parses as
# MULTI: DuckDB first makes an enum of the column names. It is a read when the statement itself is a query;
# `CREATE TABLE ... AS PIVOT` or `INSERT ... PIVOT` are MULTI too, and begin otherwise.
_QUERY_START = re.compile(r"^\s*(?:--[^\n]*\n\s*)*\(*\s*(SELECT|WITH|FROM|PIVOT|UNPIVOT)\b", re.IGNORECASE)
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(ANALYZE\s+)?", re.IGNORECASE)
FETCH_ROWS = 1000


@contextlib.contextmanager
def opened(db: Path, sql: str, *, timeout: float | None, workspace: str | None, wait: float,
           scope: Callable[[Any, str], None], check_schema: Callable[[Any], None]) -> Iterator[ReadResult]:
    """One read statement's columns and its rows, fetched a chunk at a time while the block lasts; four locks
    hold: read-only file, statement type, no file access, time limit. A file a sync is writing is waited for
    up to `wait` seconds, then refused with the busy exit status."""
    if not db.is_file():
        raise ReadRefused(f"no history yet at {db}: run scanwatch sync")
    con = _open_waiting(db, wait)
    timer = threading.Timer(timeout, con.interrupt) if timeout is not None else None
    try:
        with _duckdb_errors(timeout):
            con.execute("SET TimeZone = 'UTC'")
            check_schema(con)
            if workspace is not None:
                scope(con, workspace)
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
    try:
        yield
    except duckdb.InterruptException:
        raise ReadRefused(f"the query ran longer than {timeout:g} s and was stopped; narrow it, or give "
                          "--timeout more seconds") from None
    except duckdb.Error as exc:
        raise ReadRefused(f"query failed: {first_line(exc)}") from None


def _duckdb_rows(cursor: Any, timeout: float | None) -> Iterator[tuple[Any, ...]]:
    while True:
        with _duckdb_errors(timeout):
            chunk = cursor.fetchmany(FETCH_ROWS)
        if not chunk:
            return
        yield from chunk


def _open_waiting(db: Path, wait: float) -> Any:
    """DuckDB's read-only connection to the file, as `while_locked` waits for it."""
    return while_locked(db, wait, lambda: duckdb.connect(
        str(db), read_only=True, config={"enable_external_access": False, "autoload_known_extensions": False,
                                         "autoinstall_known_extensions": False}))


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


