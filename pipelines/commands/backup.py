"""`scanwatch backup DEST`: a consistent copy of the history, safe to take while a sync writes it.

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
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from pipelines.core.text import printable
from pipelines.storage.read_only import DEFAULT_WAIT, ReadRefused, while_locked

if TYPE_CHECKING:
    from pipelines.core.history_location import HistoryLocation

EXIT_USAGE = 2


class BackupError(RuntimeError):
    """One line the user can act on; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


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
        if location.is_postgres:
            _pg_dump(location, dest)
            what = "pg_dump archive"
        else:
            _duckdb_copy(location.path, dest, args.wait)
            what = "DuckDB file"
    except ReadRefused as exc:
        print(f"scanwatch backup: {printable(exc)}", file=sys.stderr)
        return exc.code
    except BackupError as exc:
        print(f"scanwatch backup: {printable(exc)}", file=sys.stderr)
        return exc.code
    print(f"scanwatch backup: {location.masked} copied to {dest} ({what}, {dest.stat().st_size:,} bytes) in "
          f"{time.monotonic() - started:.1f} s; put it back with: scanwatch restore {dest}")
    return 0


def _duckdb_copy(db: Path, dest: Path, wait: float) -> None:
    import duckdb

    if not db.is_file():
        raise BackupError(f"no history at {db}: nothing to back up")
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)
    con = duckdb.connect(":memory:")
    try:
        # The shared lock is held from the ATTACH to the DETACH: the copy is one committed state.
        while_locked(db, wait, lambda: con.execute(f"ATTACH '{_quoted(str(db))}' AS history (READ_ONLY)"))
        try:
            con.execute(f"ATTACH '{_quoted(str(partial))}' AS backup")
            con.execute("COPY FROM DATABASE history TO backup")
            con.execute("DETACH backup")
        except duckdb.Error as exc:
            raise BackupError(f"the copy of {db} failed: {_first_line(exc)}") from None
    finally:
        con.close()
    os.replace(partial, dest)


def _pg_dump(location: HistoryLocation, dest: Path) -> None:
    program = shutil.which("pg_dump")
    if program is None:
        raise BackupError("pg_dump not found: install PostgreSQL's client tools (Debian: postgresql-client), of "
                          "the server's major version or newer")
    url, env = libpq_target(location)
    partial = dest.with_name(dest.name + ".partial")
    done = subprocess.run([program, "--format=custom", "--no-password", "--file", str(partial), "--dbname", url],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        reason = location.scrub((done.stderr.strip().splitlines() or ["no output"])[-1])
        raise BackupError(f"pg_dump of {location.masked} failed: {reason}")
    os.replace(partial, dest)


def libpq_target(location: HistoryLocation) -> tuple[str, dict[str, str]]:
    """The URL without its password, and an environment giving the password as `PGPASSWORD`: a password on a
    command line is visible to every user of the host (`ps`)."""
    parts = urlsplit(location.url)
    env = dict(os.environ)
    if parts.password is not None:
        from urllib.parse import unquote

        env["PGPASSWORD"] = unquote(parts.password)
        host = parts.netloc.rsplit("@", 1)[1]
        user = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0]
        parts = parts._replace(netloc=f"{user}@{host}")
    return urlunsplit(parts), env


def _quoted(text: str) -> str:
    return text.replace("'", "''")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
