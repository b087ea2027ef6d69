"""A DuckDB history's backup and restore (`scanwatch backup`, `scanwatch restore`).

The file is attached read-only to a database of this process, which takes DuckDB's shared lock: a sync
holding the file is waited for (`--wait`, bounded, as `scanwatch sql` waits), and no sync can write while the
copy is made, so the copy holds one committed state. `COPY FROM DATABASE` writes every table, view, sequence
and index into a new DuckDB file. A restore checks the backup (it opens, and no newer scanwatch wrote it),
copies it beside the history and renames it over it in one step once no sync holds the file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from pipelines.storage.destinations.errors import EXIT_USAGE, BackupFailed, first_line
from pipelines.storage.destinations.impl.duckdb.errors import while_locked


def copy(db: Path, dest: Path, wait: float) -> None:
    if not db.is_file():
        raise BackupFailed(f"no history at {db}: nothing to back up")
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)
    con = duckdb.connect(":memory:")
    try:
        # The shared lock is held from the ATTACH to the DETACH: the copy is one committed state.
        while_locked(db, wait, lambda: con.execute(f"ATTACH '{quoted(str(db))}' AS history (READ_ONLY)"))
        try:
            con.execute(f"ATTACH '{quoted(str(partial))}' AS backup")
            con.execute("COPY FROM DATABASE history TO backup")
            con.execute("DETACH backup")
        except duckdb.Error as exc:
            raise BackupFailed(f"the copy of {db} failed: {first_line(exc)}") from None
    finally:
        con.close()
    os.replace(partial, dest)


def restore(db: Path, backup: Path, replace: bool, wait: float, schema: Callable[[Any], int], newest: int) -> None:
    if (db.exists() or db.is_symlink()) and not replace:
        raise BackupFailed(f"a history is already at {db}: give --replace to replace it with {backup}", EXIT_USAGE)
    try:
        with duckdb.connect(str(backup), read_only=True) as con:
            version = schema(con)
    except duckdb.Error as exc:
        raise BackupFailed(f"{backup} is not a DuckDB history: {first_line(exc)}") from None
    if version > newest:
        raise BackupFailed(f"{backup} is at schema {version}, newer than this scanwatch's {newest}: "
                          "restore it with the scanwatch that wrote it")
    db.parent.mkdir(parents=True, exist_ok=True)
    incoming = db.with_name(db.name + ".restoring")
    shutil.copyfile(backup, incoming)
    if db.exists():
        # No sync may hold the file at the rename: the writer's lock is taken once, then let go.
        while_locked(db, wait, lambda: duckdb.connect(str(db)).close())
    os.replace(incoming, db)
    Path(str(db) + ".wal").unlink(missing_ok=True)  # a WAL of the replaced file belongs to it alone




def quoted(text: str) -> str:
    return text.replace("'", "''")
