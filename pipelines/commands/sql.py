"""`scanwatch sql`: the cookbook and ad-hoc read-only SQL on the history.

The history is the pipeline's to write: queries go through the read-only door (`pipelines/storage/read_only.py`),
and every value printed has its control characters escaped, so a name the service sent cannot drive the
terminal. DuckDB is imported only when a query runs, so listing the cookbook stays instant.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import decimal
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from pipelines.core.text import printable
from pipelines.storage.read_only import (
    AS_WRITER_VARIABLE,
    DEFAULT_TIMEOUT,
    DEFAULT_WAIT,
    MAX_TIMEOUT,
    ReadRefused,
    opened,
)

DEFAULT_MAX_ROWS = 100_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "query",
        nargs="?",
        help="a cookbook name, a read-only SQL statement, or - to read SQL from stdin; none lists the cookbook",
    )
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    parser.add_argument("--workspace", metavar="NAME", default=None,
                        help="show this workspace's rows (its name in SCANWATCH_WORKSPACES_FILE, or default): a "
                             "filter, not a boundary; the role is the boundary (on PostgreSQL, a workspace role "
                             "made by scanwatch roles --workspace sees no other workspace's rows)")
    parser.add_argument("--db", help="the history: a DuckDB file or a postgresql:// URL (default: SCANWATCH_DB or "
                                     "data/scanwatch.duckdb; a URL's password is better left in PGPASSWORD or .pgpass)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds a query may run before it is stopped (default {DEFAULT_TIMEOUT:g}, at most "
                             f"{MAX_TIMEOUT:g})")
    parser.add_argument("--wait", type=float, default=DEFAULT_WAIT,
                        help="seconds to wait for a sync writing a DuckDB history before giving up with exit 75 "
                             f"(default {DEFAULT_WAIT:g}; 0: do not wait)")
    parser.add_argument("--max-rows", type=_positive, default=DEFAULT_MAX_ROWS, metavar="N",
                        help="print at most N rows, then a line saying the result was cut (default "
                             f"{DEFAULT_MAX_ROWS})")
    parser.add_argument("--max-bytes", type=_positive, default=DEFAULT_MAX_BYTES, metavar="N",
                        help="print at most about N bytes of rows, then a line saying the result was cut (default "
                             f"{DEFAULT_MAX_BYTES})")
    parser.add_argument("--as-writer", action="store_true",
                        help="on PostgreSQL, read even as a role that could write or a superuser (refused "
                             f"otherwise; {AS_WRITER_VARIABLE}=1 does the same): still one statement, read only")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number above 0, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number above 0, not {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from pipelines.core import sqlfiles

    queries = sqlfiles.cookbook()
    if args.query is None:
        _print_cookbook(queries)
        return 0
    # Only a plain yes turns it on: "false", "no" or "off" keep the refusal.
    as_writer = args.as_writer or os.environ.get(AS_WRITER_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")
    try:
        sql = _resolve_sql(args.query, queries)
        with opened(_db_path(args.db), sql, timeout=args.timeout, workspace=args.workspace,
                    as_writer=as_writer, wait=args.wait) as (columns, rows):
            held, cut = bounded_rows(rows, args.max_rows, args.max_bytes)
    except ReadRefused as exc:
        print(f"scanwatch sql: {printable(exc)}", file=sys.stderr)
        return exc.code
    # Printed once the history is let go: a slow pager holds neither the DuckDB file nor a PostgreSQL
    # transaction (whose snapshot and locks a migration would wait behind).
    try:
        write_result(columns, held, args.format, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        # `scanwatch sql ... | head` is normal use: the reader has what it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if cut:
        print(f"scanwatch sql: the result was cut at {cut}; narrow the query, or raise the limit", file=sys.stderr)
    return 0


def _db_path(given: str | None) -> str:
    if given is not None:
        return given
    from pipelines.core import settings

    return settings.Settings.load().history.value


def _resolve_sql(query: str, queries: dict[str, Any]) -> str:
    """A bare word is a cookbook name; a typo deserves a hint, not DuckDB's parser error."""
    from pipelines.core.sqlfiles import cookbook_sql

    text = sys.stdin.read() if query == "-" else query
    try:
        return cookbook_sql(text, queries)
    except KeyError:
        raise ReadRefused(f"no cookbook query named {text.strip()!r}; run 'scanwatch sql' to list them") from None


def _print_cookbook(queries: dict[str, Any]) -> None:
    width = max((len(n) for n in queries), default=0)
    print("Cookbook queries (run one with: scanwatch sql NAME [--format csv|json]):\n")
    for name, query in queries.items():
        print(f"  {name.ljust(width)}  {query.description}")


def bounded_rows(rows: Iterable[tuple[Any, ...]], max_rows: int, max_bytes: int
                 ) -> tuple[list[tuple[Any, ...]], str | None]:
    """The rows, fetched until `max_rows` of them or about `max_bytes` of their text, and which limit cut them
    (None when none did): what the command holds is bounded whatever the result's size."""
    held: list[tuple[Any, ...]] = []
    size = 0
    for row in rows:
        if len(held) >= max_rows:
            return held, f"{len(held)} rows (--max-rows {max_rows})"
        if size >= max_bytes:
            return held, f"{len(held)} rows, {size} bytes (--max-bytes {max_bytes})"
        held.append(row)
        size += sum(len(str(v)) for v in row if v is not None)
    return held, None


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
