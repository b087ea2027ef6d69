"""`scanwatch backfill`: rebuild the days before the first sync from the scans and issues already read.

The first sync does this by itself; run it again after the history learned more about the past (a site
proved owned shows issues that were hidden). A re-run on the same history changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=Path, help="DuckDB history file (default: SCANWATCH_DB or data/scanwatch.duckdb)")


def open_history(given: Path | None, command: str):
    """The history, opened for writing, or None after one line saying why not (none yet, or a sync holds it).

    A backfill reads what a sync stored; it never calls the service, so there must be a history already.
    """
    from pipelines import settings
    from pipelines.storage.db import HistoryLockedError, connect

    history = settings.Settings.load().history if given is None else None
    if history is not None and history.is_postgres:
        print(f"scanwatch {command}: the past is not rebuilt in a PostgreSQL history yet ({history.masked}); "
              "docs/postgres.md says what runs there today", file=sys.stderr)
        return None
    path = given if given is not None else history.path
    if not path.is_file():
        print(f"scanwatch {command}: no history at {path}: run 'scanwatch sync' first (or set SCANWATCH_DB / --db)",
              file=sys.stderr)
        return None
    try:
        return connect(path)
    except HistoryLockedError as exc:
        print(f"scanwatch {command}: {exc}", file=sys.stderr)
        return None


def run(args: argparse.Namespace) -> int:
    from pipelines.backfill.reconstruct import reconstruct

    conn = open_history(args.db, "backfill")
    if conn is None:
        return 1
    try:
        results = reconstruct(conn)
    finally:
        conn.close()
    if not results:
        print("scanwatch backfill: no workspace synced yet: run 'scanwatch sync' first", file=sys.stderr)
        return 1
    for result in results:
        print(f"scanwatch backfill: {result.describe()}")
    return 0
