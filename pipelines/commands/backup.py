"""`scanwatch backup DEST`: a consistent copy of the history, safe to take while a sync writes it.

Each engine makes its own copy (`pipelines/storage/destinations/impl/<name>/backup.py`):

- DuckDB: the file is attached read-only to a database of this process, which takes DuckDB's shared lock:
  a sync holding the file is waited for (`--wait`, bounded, as `scanwatch sql` waits), and no sync can write
  while the copy is made, so the copy holds one committed state. `COPY FROM DATABASE` writes every table,
  view, sequence and index into a new DuckDB file, DEST. A sync waiting behind the copy waits up to 120 s
  for the file (docs/operations.md), far more than a copy of a large history takes.
- PostgreSQL: `pg_dump` in its custom format, which reads every table in one REPEATABLE READ snapshot:
  writers are never blocked and the dump holds one committed state. The password goes to `pg_dump` in
  `PGPASSWORD`, never on its command line.

`scanwatch restore` (pipelines/commands/restore.py) puts such a copy back.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.core.text import printable
from pipelines.storage.destinations.errors import EXIT_USAGE, BackupFailed

if TYPE_CHECKING:
    from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.impl import engine_for
from pipelines.storage.read_only import DEFAULT_WAIT, ReadRefused

# One line the user can act on; `code` is the exit status. Each engine's backup raises it (its folder's backup.py).
BackupError = BackupFailed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dest", metavar="DEST",
                        help="the backup to write: a new DuckDB file for a DuckDB history, a pg_dump archive "
                             "(custom format) for a PostgreSQL one; never overwritten")
    add_history_arguments(parser)


def add_history_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="the history: a DuckDB file or a postgresql:// URL (default: SCANWATCH_DB or "
                                     "data/scanwatch.duckdb; a URL's password is better left in PGPASSWORD or .pgpass)")
    parser.add_argument("--wait", type=float, default=DEFAULT_WAIT,
                        help=f"seconds to wait for a sync holding a DuckDB history (default {DEFAULT_WAIT:g})")


def history_location(given: str | None) -> HistoryLocation:
    from pipelines.core.history_location import HistoryLocation
    from pipelines.core.settings import ConfigError, Settings

    try:
        return HistoryLocation.parse(given, "--db") if given is not None else Settings.load().history
    except ConfigError as exc:
        raise BackupError(str(exc), EXIT_USAGE) from None


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        location = history_location(args.db)
        dest = Path(args.dest)
        if dest.exists() or dest.is_symlink():
            raise BackupError(f"{dest} already exists: name a new file (a backup never overwrites one)", EXIT_USAGE)
        if not dest.parent.is_dir():
            raise BackupError(f"{dest.parent} is not a folder: create it first", EXIT_USAGE)
        what = engine_for(location).backup(location, dest, wait=args.wait)
    except ReadRefused as exc:
        print(f"scanwatch backup: {printable(exc)}", file=sys.stderr)
        return exc.code
    except BackupError as exc:
        print(f"scanwatch backup: {printable(exc)}", file=sys.stderr)
        return exc.code
    print(f"scanwatch backup: {location.masked} copied to {dest} ({what}, {dest.stat().st_size:,} bytes) in "
          f"{time.monotonic() - started:.1f} s; put it back with: scanwatch restore {dest}")
    return 0
