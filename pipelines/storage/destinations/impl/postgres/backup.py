"""A PostgreSQL history's backup and restore (`scanwatch backup`, `scanwatch restore`).

`pg_dump` in its custom format reads every table in one REPEATABLE READ snapshot: writers are never blocked
and the dump holds one committed state. `pg_restore` puts it into the database of `SCANWATCH_DB` in one
transaction, which must hold no history yet (a new database, `createdb`), or, with `--replace`, whose objects
are dropped first. The password goes to both in `PGPASSWORD`, never on their command line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.errors import EXIT_USAGE, BackupFailed


def dump(location: HistoryLocation, dest: Path) -> None:
    program = shutil.which("pg_dump")
    if program is None:
        raise BackupFailed("pg_dump not found: install PostgreSQL's client tools (Debian: postgresql-client), of "
                          "the server's major version or newer")
    url, env = libpq_target(location)
    partial = dest.with_name(dest.name + ".partial")
    done = subprocess.run([program, "--format=custom", "--no-password", "--file", str(partial), "--dbname", url],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        reason = location.scrub((done.stderr.strip().splitlines() or ["no output"])[-1])
        raise BackupFailed(f"pg_dump of {location.masked} failed: {reason}")
    os.replace(partial, dest)


def restore(location: HistoryLocation, backup: Path, replace: bool, holds_history: Callable[[], bool]) -> None:
    program = shutil.which("pg_restore")
    if program is None:
        raise BackupFailed("pg_restore not found: install PostgreSQL's client tools (Debian: postgresql-client)")
    if not replace and holds_history():
        raise BackupFailed(f"{location.masked} already holds a history: restore into a new database (createdb), or "
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
        raise BackupFailed(f"pg_restore into {location.masked} failed, nothing was changed: {reason}")


def libpq_target(location: HistoryLocation) -> tuple[str, dict[str, str]]:
    """The URL without its password, and an environment giving the password as `PGPASSWORD`: a password on a
    command line is visible to every user of the host (`ps`)."""
    parts = urlsplit(location.url)
    env = dict(os.environ)
    if parts.password is not None:
        env["PGPASSWORD"] = unquote(parts.password)
        host = parts.netloc.rsplit("@", 1)[1]
        user = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0]
        parts = parts._replace(netloc=f"{user}@{host}")
    return urlunsplit(parts), env


