"""Opening the history and carrying its schema forward.

Migrations are numbered `.sql` files applied in order, each in its own transaction and recorded in
`schema_migrations`, so an existing history is upgraded in place the first time a newer scanwatch opens it.
Most are in `sql/migrations/` and run on every engine; one that concerns a single engine lives in that
engine's folder, `sql/engines/<name>/migrations/` (the engine's `sql_folder`): another engine records it as
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
from pipelines.storage.destinations import Connection, Engine, HistoryLockedError, HistoryUnavailableError
from pipelines.storage.destinations.impl import engine_for, location_of
from pipelines.storage.destinations.impl.duckdb.sql_client import SETTINGS
from pipelines.storage.reference import vocabulary_current, write_vocabulary
from pipelines.storage.views import definitions, digest, drop_views, write_views

__all__ = ["SETTINGS", "HistoryLockedError", "HistoryNewerError", "connect", "migrate", "reader", "refuse_newer",
           "schema_version", "writer"]

_MIGRATION = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


@functools.cache  # the engines' folders are the package's: looked for once per process, not at every open
def _migration_folders() -> list[Path]:
    """`sql/migrations/` (every engine's), then each engine's own `sql/engines/<name>/migrations/`."""
    root = sql_dir()
    return [root / "migrations", *sorted(p for p in (root / "engines").glob("*/migrations") if p.is_dir())]


def _migrations() -> list[tuple[int, str]]:
    """Every migration's version and name, whichever engine runs it."""
    return [(version, name) for version, name, _ in _migration_files()]


def _migration_files() -> list[tuple[int, str, str]]:
    """Every migration with its file under `sql/`, listed again only when a folder changed (every open of the
    history asks)."""
    folders = _migration_folders()
    return list(_listed(tuple(folders), tuple(f.stat().st_mtime_ns for f in folders)))


@functools.lru_cache(maxsize=8)
def _listed(folders: tuple[Path, ...], _changed: tuple[int, ...]) -> tuple[tuple[int, str, str], ...]:
    root = sql_dir()
    found: dict[int, tuple[int, str, str]] = {}
    for folder in folders:
        for path in sorted(folder.iterdir()):
            m = _MIGRATION.match(path.name)
            if m:
                version = int(m.group(1))
                if version in found:
                    raise RuntimeError(f"two migrations of version {version}: {found[version][2]} and "
                                       f"{path.relative_to(root)}")
                found[version] = (version, path.name, str(path.relative_to(root)))
    return tuple(found[v] for v in sorted(found))


def latest_version() -> int:
    """The schema version this code reads and writes: its newest migration."""
    return _migrations()[-1][0]


def applies_to(relative: str, engine: Engine) -> bool:
    """Whether the migration at `relative` (under `sql/`) runs on `engine`: every engine's, or its own."""
    return Path(relative).parent in (Path("migrations"), Path(engine.sql_folder) / "migrations")


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
        for version, name, relative in _migration_files():
            if version <= current or (target is not None and version > target):
                continue
            if not applied and _has_table(conn, "view_layer"):  # a table a view reads may change: views go first
                with transaction(conn):
                    drop_views(conn)
            with transaction(conn, "migrate"):
                if applies_to(relative, conn.engine):
                    conn.engine.run_script(conn, read_sql(relative))
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
    if version != latest_version() or views != digest(views_wanted):
        return False
    seen = (conn.location.masked, version, views)
    if seen in _VERIFIED:
        return True
    if not (conn.engine.layer_current(conn) and vocabulary_current(conn)
            and conn.engine.views_granted(conn, list(views_wanted))):
        return False
    _VERIFIED.add(seen)
    return True


# Histories this process found entirely current at a schema version and views digest: what only a migration
# or this scanwatch itself rewrites (the vocabulary, the compatibility layer, the views' grants) is read
# once per process, not at each of the ~9 opens of every workspace's run (4 reads, a third of an unchanged
# workspace's open on DuckDB). A history that moves to another version or digest is checked in full again.
_VERIFIED: set[tuple[str, int, str]] = set()


def _has_table(conn: Connection, name: str) -> bool:
    return bool(conn.execute(read_sql("storage/table_exists.sql"), {"name": name}).fetchall()[0][0])


def connect(db: str | Path | HistoryLocation, *, wait_seconds: float = 30.0) -> Connection:
    """A read-write connection with the schema current. A DuckDB file held by another process's writer is
    waited for a while, then named; a PostgreSQL server that cannot be used is one line saying why."""
    location = location_of(db)
    conn = engine_for(location).connect(location, wait_seconds=wait_seconds)
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
    connection that never waits for a writer. A statement that fails is HistoryQueryError, whichever engine."""
    location = location_of(db)
    conn = engine_for(location).connect_reader(location, wait_seconds=wait_seconds)
    try:
        with conn.engine.mapped(conn):  # a driver's error of the read as scanwatch's own (HistoryQueryError)
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
    with engine_for(location).writer_turns(location):
        conn = connect(location, wait_seconds=wait_seconds)
        try:
            yield conn
        finally:
            conn.close()


def holds_history(db: str | Path | HistoryLocation) -> bool:
    """Whether a history scanwatch wrote is at `db` (a DuckDB file exists; a PostgreSQL database has a schema)."""
    location = location_of(db)
    return engine_for(location).holds_history(location, schema_version)


def check_before_sync(db: str | Path | HistoryLocation) -> None:
    """What a sync can learn of the history before its steps start, as one line rather than one per step:
    where writers open the history at once (PostgreSQL), it is opened and its schema carried forward now (a
    wrong password or an unreachable server is HistoryUnavailableError); where one writer holds it at a time
    (a DuckDB file), an existing history is only read, without waiting, for a newer scanwatch's schema (a file
    another sync writes is left to the steps, which wait their turn and check it then)."""
    location = location_of(db)
    engine = engine_for(location)
    if not engine.capabilities.single_writer:
        connect(location).close()
    elif engine.exists(location):
        with contextlib.suppress(HistoryLockedError), reader(location) as conn:
            refuse_newer(conn, schema_version(conn))
