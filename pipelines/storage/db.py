"""Opening the history and carrying its schema forward.

Migrations are numbered `.sql` files applied in order, each in its own transaction and recorded in
`schema_migrations`, so an existing history is upgraded in place the first time a newer scanwatch opens it.
A migration whose header says `-- engines: duckdb` concerns that engine alone: another one records it as
applied without running it, so every history counts the same versions.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipelines.core.history_location import HistoryLocation
from pipelines.core.sqlfiles import read_sql, sql_dir, transaction
from pipelines.storage.engines import (
    Connection,
    HistoryLockedError,
    HistoryUnavailableError,
    location_of,
)
from pipelines.storage.engines.duckdb_engine import DUCKDB, SETTINGS, file_writer
from pipelines.storage.reference import vocabulary_current, write_vocabulary
from pipelines.storage.views import definitions, digest, drop_views, write_views

__all__ = ["SETTINGS", "HistoryLockedError", "HistoryNewerError", "connect", "migrate", "reader", "refuse_newer",
           "schema_version", "writer"]

_MIGRATION = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
_ENGINES = re.compile(r"^--\s*engines:\s*(.+)$", re.MULTILINE)


def _migrations() -> list[tuple[int, str]]:
    """Every migration, listed again only when the folder changed (every open of the history asks)."""
    folder = sql_dir() / "migrations"
    return list(_listed(folder, folder.stat().st_mtime_ns))


@functools.lru_cache(maxsize=8)
def _listed(folder: Path, _changed: int) -> tuple[tuple[int, str], ...]:
    found = []
    for path in sorted(folder.iterdir()):
        m = _MIGRATION.match(path.name)
        if m:
            found.append((int(m.group(1)), path.name))
    return tuple(found)


def latest_version() -> int:
    """The schema version this code reads and writes: its newest migration."""
    return _migrations()[-1][0]


def applies_to(text: str, engine: str) -> bool:
    """Whether a migration runs on `engine`: every migration does unless its header names its engines."""
    header = "\n".join(line for line in text.splitlines() if line.startswith("--"))
    named = _ENGINES.search(header)
    return named is None or engine in {e.strip() for e in named.group(1).split(",")}


class HistoryNewerError(HistoryUnavailableError):
    """The history is at a schema newer than this code's: a newer scanwatch wrote it. This one may read it but
    never writes it, least of all its views layer, which it would rewrite with its own older definitions."""


def refuse_newer(conn: Connection, version: int) -> None:
    """HistoryNewerError when `version` (the history's) is above this code's, in one line naming both."""
    ours = latest_version()
    if version > ours:
        raise HistoryNewerError(
            f"the history at {conn.label} is at schema {version}, newer than this scanwatch's {ours}: this version "
            "only reads it (scanwatch sql, the exporter); sync with the scanwatch that wrote it, or upgrade this one")


def schema_version(conn: Connection) -> int:
    if not _has_table(conn, "schema_migrations"):
        return 0
    version: int = conn.execute(read_sql("storage/schema_version.sql")).fetchall()[0][0]
    return version


def migrate(conn: Connection, *, target: int | None = None) -> list[int]:
    """Apply the migrations this history lacks (up to `target`); returns the versions applied."""
    if target is None and _up_to_date(conn):
        return []
    applied: list[int] = []
    with conn.engine.migrating(conn):
        conn.execute(read_sql("storage/schema_migrations.sql"))
        current = schema_version(conn)
        refuse_newer(conn, current)
        for version, name in _migrations():
            if version <= current or (target is not None and version > target):
                continue
            if not applied and _has_table(conn, "view_layer"):  # a table a view reads may change: views go first
                with transaction(conn):
                    drop_views(conn)
            text = read_sql(f"migrations/{name}")
            with transaction(conn, "migrate"):
                if applies_to(text, conn.engine.name):
                    conn.engine.run_script(conn, text)
                conn.execute(read_sql("storage/record_migration.sql"), {"version": version, "name": name})
            applied.append(version)
        if _has_table(conn, "severities"):  # a history at schema 3 or later (a test may stop before)
            # Written only when it differs (after an upgrade). Another connection of this process (a second
            # workspace's step) may write the same definition at that moment; its copy is this one, so a
            # conflict leaves nothing to redo.
            with contextlib.suppress(*conn.engine.conflicts):
                write_vocabulary(conn)
        if _has_table(conn, "view_layer") and (target is None or target >= latest_version()):
            with contextlib.suppress(*conn.engine.conflicts):  # the same race, for the views layer
                write_views(conn)
    return applied


def _up_to_date(conn: Connection) -> bool:
    """Whether everything `migrate` keeps current already is, by reads alone. Every step of every sync opens
    the history: an up-to-date one (the usual case) then takes no lock, so writers of different workspaces
    never queue on the migration lock (PostgreSQL's advisory lock, held while another opener checks). Two
    reads: the version and the views' digest together (`storage/current.sql`), then the vocabulary."""
    try:
        version, views = conn.execute(read_sql("storage/current.sql")).fetchall()[0]
    except conn.engine.missing_table:
        return False
    refuse_newer(conn, version)
    views_wanted = definitions()
    if version != latest_version() or views != digest(views_wanted) or not conn.engine.layer_current(conn):
        return False
    return vocabulary_current(conn) and conn.engine.views_granted(conn, list(views_wanted))


def _has_table(conn: Connection, name: str) -> bool:
    return bool(conn.execute(read_sql("storage/table_exists.sql"), {"name": name}).fetchall()[0][0])


def connect(db: str | Path | HistoryLocation, *, wait_seconds: float = 30.0) -> Connection:
    """A read-write connection with the schema current. A DuckDB file held by another process's writer is
    waited for a while, then named; a PostgreSQL server that cannot be used is one line saying why."""
    location = location_of(db)
    if location.is_postgres:
        from pipelines.storage.engines.postgres_engine import POSTGRES

        conn = POSTGRES.open(location)
    else:
        conn = DUCKDB.open(location.path, wait_seconds=wait_seconds)
    try:
        migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def reader(db: str | Path | HistoryLocation, *, wait_seconds: float = 0.0) -> Iterator[Connection]:
    """The history for a brief read (a sensor's look at the queued scans): DuckDB's file opened read-only (a
    file a writer holds is waited for up to `wait_seconds`, then HistoryLockedError), or a PostgreSQL
    connection that never waits for a writer."""
    location = location_of(db)
    if location.is_postgres:
        from pipelines.storage.engines.postgres_engine import POSTGRES

        conn = POSTGRES.open(location, writer=False)
    else:
        conn = DUCKDB.open_read_only(location.path, wait_seconds=wait_seconds)
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def writer(db: str | Path | HistoryLocation, *, wait_seconds: float = 30.0) -> Iterator[Connection]:
    """The history for one read or merge, then released.

    A DuckDB file takes one writer: threads of one process take turns on a lock per file, other processes
    on DuckDB's file lock. A PostgreSQL history takes every writer at once; merges of one workspace take
    turns on the server (`Engine.lock_workspace`).
    """
    location = location_of(db)
    turns = contextlib.nullcontext() if location.is_postgres else file_writer(location.path)
    with turns:
        conn = connect(location, wait_seconds=wait_seconds)
        try:
            yield conn
        finally:
            conn.close()
