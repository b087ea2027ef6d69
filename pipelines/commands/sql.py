"""`scanwatch sql`: the cookbook and ad-hoc read-only SQL on the history.

The history is the pipeline's to write, and read-only here holds by construction: DuckDB opens the file
read-only with external access off and its configuration locked; the parsed statement must be a read
(an EXPLAIN, which EXPLAIN ANALYZE runs, only of a read); a time limit interrupts it; and every value
printed has its control characters escaped, so a name the service sent cannot drive the terminal. DuckDB
is imported only when a query runs, so listing the cookbook stays instant.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import decimal
import json
import os
import re
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.text import printable

EXIT_ERROR = 1
EXIT_BUSY = 75  # EX_TEMPFAIL: the same command will work once the sync is done
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_READ_TYPES = {"SELECT", "EXPLAIN"}  # SHOW, DESCRIBE, SUMMARIZE, FROM and VALUES parse as SELECT
# A PIVOT whose columns come from a query (`ON severity IN (SELECT severity FROM severities)`) parses as
# MULTI: DuckDB first makes an enum of the column names. It is a read when the statement itself is a query;
# `CREATE TABLE ... AS PIVOT` or `INSERT ... PIVOT` are MULTI too, and begin otherwise.
_QUERY_START = re.compile(r"^\s*(?:--[^\n]*\n\s*)*\(*\s*(SELECT|WITH|FROM|PIVOT|UNPIVOT)\b", re.IGNORECASE)
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(ANALYZE\s+)?", re.IGNORECASE)
DEFAULT_TIMEOUT = 60.0


class SqlCommandError(Exception):
    """A condition the user can act on; the message is the whole output, no traceback."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "query",
        nargs="?",
        help="a cookbook name, a read-only SQL statement, or - to read SQL from stdin; none lists the cookbook",
    )
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    parser.add_argument("--workspace", metavar="NAME", default=None,
                        help="only this workspace's rows (its name in SCANWATCH_WORKSPACES_FILE, or default)")
    parser.add_argument("--db", type=Path, help="DuckDB history file (default: SCANWATCH_DB or data/scanwatch.duckdb)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds a query may run before it is stopped (default {DEFAULT_TIMEOUT:g})")


def run(args: argparse.Namespace) -> int:
    from pipelines import sqlfiles

    queries = sqlfiles.cookbook()
    if args.query is None:
        _print_cookbook(queries)
        return 0
    try:
        sql = _resolve_sql(args.query, queries)
        columns, rows = execute_read_only(_db_path(args.db), sql, timeout=args.timeout, workspace=args.workspace)
    except SqlCommandError as exc:
        print(f"scanwatch sql: {printable(exc)}", file=sys.stderr)
        return exc.code
    try:
        write_result(columns, rows, args.format, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        # `scanwatch sql ... | head` is normal use: the reader has what it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _db_path(given: Path | None) -> Path:
    if given is not None:
        return given
    from pipelines import settings

    return settings.Settings.load().paths.db


def _resolve_sql(query: str, queries: dict[str, Any]) -> str:
    """A bare word is a cookbook name; a typo deserves a hint, not DuckDB's parser error."""
    text = sys.stdin.read() if query == "-" else query
    name = text.strip()
    if name in queries:
        return queries[name].sql
    if _NAME.match(name):
        raise SqlCommandError(f"no cookbook query named {name!r}; run 'scanwatch sql' to list them")
    return text


def execute_read_only(db: Path, sql: str, *, timeout: float | None = DEFAULT_TIMEOUT, workspace: str | None = None
                      ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one read statement; four locks hold: read-only file, statement type, no file access, time limit.
    With `workspace`, every table shows that workspace's rows only."""
    import duckdb

    if timeout is not None and not timeout > 0:
        raise SqlCommandError(f"--timeout must be a number of seconds above 0 (got {timeout:g})")
    if not db.is_file():
        raise SqlCommandError(f"no history yet at {db}: run scanwatch sync")
    try:
        con = duckdb.connect(str(db), read_only=True,
                             config={"enable_external_access": False, "autoload_known_extensions": False,
                                     "autoinstall_known_extensions": False})
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise SqlCommandError(
                f"a sync is writing the history at {db}; try again in a moment", EXIT_BUSY
            ) from None
        raise SqlCommandError(f"cannot open {db}: {_first_line(exc)}") from None
    except duckdb.Error as exc:
        raise SqlCommandError(f"cannot open {db}: {_first_line(exc)}") from None
    timer = threading.Timer(timeout, con.interrupt) if timeout is not None else None
    try:
        con.execute("SET TimeZone = 'UTC'")
        if workspace is not None:
            from pipelines.workspace_scope import UnknownWorkspaceError, scope_to_workspace

            try:
                scope_to_workspace(con, workspace)
            except UnknownWorkspaceError as exc:
                raise SqlCommandError(str(exc)) from None
        con.execute("SET lock_configuration = true")
        statement = _single_read_statement(con, sql)
        if timer is not None:
            timer.start()
        cursor = con.execute(statement)
        columns = [d[0] for d in cursor.description or []]
        return columns, cursor.fetchall()
    except duckdb.InterruptException:
        raise SqlCommandError(f"the query ran longer than {timeout:g} s and was stopped; narrow it, or give "
                              "--timeout more seconds") from None
    except duckdb.Error as exc:
        raise SqlCommandError(f"query failed: {_first_line(exc)}") from None
    finally:
        if timer is not None:
            timer.cancel()
        con.close()


def _single_read_statement(con: Any, sql: str) -> str:
    statements = con.extract_statements(sql)
    if not statements:
        raise SqlCommandError("nothing to run: give a cookbook name or a SELECT statement")
    if len(statements) > 1:
        raise SqlCommandError(f"one statement at a time (got {len(statements)})")
    kind = _kind(statements[0])
    if kind == "MULTI" and _QUERY_START.match(statements[0].query):
        kind = "SELECT"
    if kind not in _READ_TYPES:
        raise SqlCommandError(
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
            raise SqlCommandError(f"the history is read-only here: EXPLAIN of {what} is refused; EXPLAIN a "
                                  "SELECT instead")
    return statements[0].query


def _kind(statement: Any) -> str:
    return str(statement.type).rsplit(".", 1)[-1]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _print_cookbook(queries: dict[str, Any]) -> None:
    width = max((len(n) for n in queries), default=0)
    print("Cookbook queries (run one with: scanwatch sql NAME [--format csv|json]):\n")
    for name, query in queries.items():
        print(f"  {name.ljust(width)}  {query.description}")


def write_result(columns: list[str], rows: Sequence[tuple[Any, ...]], fmt: str, out: Any) -> None:
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([printable(c) for c in columns])
        writer.writerows([["" if v is None else _text(v) for v in row] for row in rows])
    elif fmt == "json":
        # JSON escapes control characters itself (ensure_ascii), lone surrogates included.
        json.dump([dict(zip(columns, map(_jsonable, row), strict=True)) for row in rows], out, indent=2)
        out.write("\n")
    else:
        out.write(format_table(columns, rows))


def format_table(columns: list[str], rows: Sequence[tuple[Any, ...]]) -> str:
    """A plain aligned table: numbers right, text left, long text cut so a row stays on one line."""
    columns = [printable(c) for c in columns]
    cells = [["" if v is None else _text(v, limit=60) for v in row] for row in rows]
    numeric = [
        all(isinstance(row[i], (int, float, decimal.Decimal)) or row[i] is None for row in rows) and bool(rows)
        for i in range(len(columns))
    ]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    lines = [line(columns), "  ".join("-" * w for w in widths)]
    lines += [line(r) for r in cells]
    lines.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(lines) + "\n"


def _text(value: Any, limit: int | None = None) -> str:
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, float):
        text = f"{value:.10g}"
    else:
        text = str(value)
    text = printable(text.replace("\n", " "))
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
