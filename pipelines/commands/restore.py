"""`scanwatch restore BACKUP`: put back a history `scanwatch backup` wrote.

Stop the schedules and syncs first (docs/operations.md, "Backup and restore"): a restore replaces the whole
history, and a sync that started before it would go on writing to what it replaced.

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
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.commands.backup import EXIT_USAGE, BackupError, add_history_arguments, history_location, libpq_target
from pipelines.core.text import printable
from pipelines.storage.read_only import ReadRefused, while_locked

if TYPE_CHECKING:
    from pipelines.core.history_location import HistoryLocation


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
        if location.is_postgres:
            _pg_restore(location, backup, args.replace)
        else:
            _duckdb_restore(location.path, backup, args.replace, args.wait)
    except (ReadRefused, BackupError) as exc:
        print(f"scanwatch restore: {printable(exc)}", file=sys.stderr)
        return exc.code
    print(f"scanwatch restore: {backup} restored into {location.masked} in {time.monotonic() - started:.1f} s; "
          "the next scanwatch sync carries on from it")
    return 0


def _duckdb_restore(db: Path, backup: Path, replace: bool, wait: float) -> None:
    import duckdb

    from pipelines.storage.db import latest_version, schema_version
    from pipelines.storage.engines import DUCKDB, Connection

    if (db.exists() or db.is_symlink()) and not replace:
        raise BackupError(f"a history is already at {db}: give --replace to replace it with {backup}", EXIT_USAGE)
    try:
        with Connection(duckdb.connect(str(backup), read_only=True), DUCKDB) as con:
            version = schema_version(con)
    except duckdb.Error as exc:
        raise BackupError(f"{backup} is not a DuckDB history: {_first_line(exc)}") from None
    if version > latest_version():
        raise BackupError(f"{backup} is at schema {version}, newer than this scanwatch's {latest_version()}: "
                          "restore it with the scanwatch that wrote it")
    db.parent.mkdir(parents=True, exist_ok=True)
    incoming = db.with_name(db.name + ".restoring")
    shutil.copyfile(backup, incoming)
    if db.exists():
        # No sync may hold the file at the rename: the writer's lock is taken once, then let go.
        while_locked(db, wait, lambda: duckdb.connect(str(db)).close())
    os.replace(incoming, db)
    Path(str(db) + ".wal").unlink(missing_ok=True)  # a WAL of the replaced file belongs to it alone


def _pg_restore(location: HistoryLocation, backup: Path, replace: bool) -> None:
    program = shutil.which("pg_restore")
    if program is None:
        raise BackupError("pg_restore not found: install PostgreSQL's client tools (Debian: postgresql-client)")
    if not replace and _holds_history(location):
        raise BackupError(f"{location.masked} already holds a history: restore into a new database (createdb), or "
                          "give --replace to drop its objects first", EXIT_USAGE)
    url, env = libpq_target(location)
    argv = [program, "--no-password", "--no-owner", "--exit-on-error", "--single-transaction", "--dbname", url]
    if replace:
        argv += ["--clean", "--if-exists"]
    done = subprocess.run([*argv, str(backup)], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        reason = location.scrub(next((line for line in lines if "error" in line.lower()), lines[-1] if lines else
                                     "no output"))
        raise BackupError(f"pg_restore into {location.masked} failed, nothing was changed: {reason}")


def _holds_history(location: HistoryLocation) -> bool:
    from pipelines.storage import HistoryUnavailableError
    from pipelines.storage.db import reader, schema_version

    try:
        with reader(location) as conn:
            return schema_version(conn) > 0
    except HistoryUnavailableError as exc:
        raise BackupError(str(exc)) from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
