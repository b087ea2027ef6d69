"""`scanwatch backfill`: rebuild the days before the first sync from the scans and issues already read.

The first sync does this by itself; run it again after the history learned more about the past (a site
proved owned shows issues that were hidden). A re-run on the same history changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelines.storage.destinations import Connection


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="the history: a DuckDB file or a postgresql:// URL (default: SCANWATCH_DB or "
                                     "data/scanwatch.duckdb)")


def open_history(given: str | None, command: str) -> Connection | None:
    """The history, opened for writing, or None after one line saying why not (none yet, a sync holds the DuckDB
    file, the PostgreSQL server cannot be used).

    A backfill reads what a sync stored; it never calls the service, so there must be a history already.
    """
    from pipelines.core import settings
    from pipelines.core.credentials import ConfigError
    from pipelines.core.history_location import HistoryLocation
    from pipelines.storage.db import HistoryLockedError, connect, holds_history
    from pipelines.storage.destinations import HistoryUnavailableError

    try:
        location = settings.Settings.load().history if given is None else HistoryLocation.parse(given, "--db")
    except ConfigError as exc:
        print(f"scanwatch {command}: {exc}", file=sys.stderr)
        return None
    try:
        if not holds_history(location):
            print(f"scanwatch {command}: no history at {location.masked}: run 'scanwatch sync' first (or set "
                  "SCANWATCH_DB / --db)", file=sys.stderr)
            return None
        return connect(location)
    except (HistoryLockedError, HistoryUnavailableError) as exc:
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
