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


def history_path(given: Path | None) -> Path:
    """The history file, which must exist: a backfill reads what a sync stored, it does not call the service."""
    from pipelines import settings

    path = given if given is not None else settings.Settings.load().paths.db
    if not path.is_file():
        raise FileNotFoundError(f"no history at {path}: run 'scanwatch sync' first (or set SCANWATCH_DB / --db)")
    return path


def run(args: argparse.Namespace) -> int:
    from pipelines.backfill.reconstruct import reconstruct
    from pipelines.storage.db import HistoryLockedError, connect

    try:
        path = history_path(args.db)
        conn = connect(path)
    except (FileNotFoundError, HistoryLockedError) as exc:
        print(f"scanwatch backfill: {exc}", file=sys.stderr)
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
