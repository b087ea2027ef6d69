"""`scanwatch restore BACKUP`: put back a history `scanwatch backup` wrote.

Stop the schedules and syncs first (docs/operations.md, "Backup and restore"): a restore replaces the whole
history, and a sync that started before it would go on writing to what it replaced.

Each engine restores its own (`pipelines/storage/destinations/impl/<name>/backup.py`):

- DuckDB: the backup is checked (it opens, and no newer scanwatch wrote it), copied beside the history, and
  renamed over it in one step once no sync holds the file; an existing history is replaced only with
  `--replace`.
- PostgreSQL: `pg_restore` into the database of `SCANWATCH_DB` in one transaction, which must hold no history
  yet (a new database, `createdb`), or, with `--replace`, whose objects are dropped first. Owners are not
  restored (the restoring role owns what it creates); grants are, so the roles of docs/postgres.md must exist.

A backup of an older schema is restored as it is: the next `scanwatch sync` brings it up to date.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.commands.backup import BackupError, add_history_arguments, history_location
from pipelines.core.text import printable
from pipelines.storage.db import latest_version, schema_version
from pipelines.storage.destinations.errors import EXIT_USAGE
from pipelines.storage.destinations.impl import engine_for
from pipelines.storage.read_only import ReadRefused

if TYPE_CHECKING:
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("backup", metavar="BACKUP", help="a file `scanwatch backup` wrote")
    parser.add_argument("--replace", action="store_true",
                        help="replace the history already at SCANWATCH_DB (default: refuse to touch it)")
    add_history_arguments(parser)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        location = history_location(args.db)
        backup = Path(args.backup)
        if not backup.is_file():
            raise BackupError(f"{backup} is not a file: give a backup `scanwatch backup` wrote", EXIT_USAGE)
        engine_for(location).restore(location, backup, replace=args.replace, wait=args.wait,
                                     schema=schema_version, newest=latest_version())
    except (ReadRefused, BackupError) as exc:
        print(f"scanwatch restore: {printable(exc)}", file=sys.stderr)
        return exc.code
    print(f"scanwatch restore: {backup} restored into {location.masked} in {time.monotonic() - started:.1f} s; "
          "the next scanwatch sync carries on from it")
    return 0
