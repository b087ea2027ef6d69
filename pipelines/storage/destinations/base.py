"""What every history engine does the same way, and the hooks where DuckDB and PostgreSQL differ.

Shaped like dlt's destinations (`destinations/impl/<name>/` with its factory, SQL client and error
mapping): one job generator (`pipelines/storage/merge.py` and `upsert.py` compose the
staging, unchanged test, events and upsert of each entity) runs on every engine, and an engine overrides only
what its database says differently: its capabilities, the parameter style, splitting a file of several
statements, loading stage files, the typed casts, the row hash of the unchanged test, and how writers of one
workspace take turns, and what the commands ask of a history (opening it, its read-only door, a backup). The
SQL files under `sql/` are one text that both engines run; what one engine alone runs is in its folder of
`sql/engines/<name>/`. The engine is chosen once, by `pipelines/storage/destinations/impl/engine_for`: nothing
else asks which engine answers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.errors import HistoryError
from pipelines.storage.destinations.stage_format import NDJSON, StagedFile, StageFormat

if TYPE_CHECKING:
    from pipelines.snapshot.format import Limits
    from pipelines.snapshot.store import SnapshotStore

T = TypeVar("T")

# The rows of a read: its column names and its rows, fetched as the caller iterates.
ReadResult = tuple[list[str], Iterator[tuple[Any, ...]]]


@dataclass(frozen=True)
class Statement:
    """One statement of a file and the `$name` parameters it names, in order of first use."""

    query: str
    named_parameters: tuple[str, ...]


@dataclass(frozen=True)
class Capabilities:
    """What the job generator may count on."""

    # One writer per database at a time (DuckDB's file lock): threads of one process take turns on a lock
    # of their own. PostgreSQL lets writers of different workspaces write at once.
    single_writer: bool
    # A failed cast stops the statement (PostgreSQL has no TRY_CAST): typed staging casts plainly first and
    # stages again with the catching casts of the compatibility layer only when a value does not fit.
    casts_can_fail: bool
    # The planner knows a temp table's rows only once it is analysed (PostgreSQL's statistics): the one-row
    # merge context is, or its default estimate of 810 rows multiplies every join with it. (The stage tables
    # are not: their size, which the planner reads from their pages, is all it needs, and analysing them
    # cost a third of a 44k-issue merge.)
    analyse_context: bool
    # How much NDJSON one merge transaction takes (None: merge.CHUNK_BYTES, bounded by scanwatch's memory).
    # PostgreSQL's stage tables live on the server, so its groups are larger: each group joins its stage
    # with the whole `issues` table, and 25 groups of a 390k-issue sync scanned it 25 times over.
    merge_group_bytes: int | None = None
    # The history's location may carry a secret (a URL's password): whoever records it (Dagster's run
    # storage) records the variable's name instead.
    location_is_secret: bool = False
    # The history can hold the metrics snapshot itself (`snapshot_parts`), for runs and an exporter that share
    # no disk.
    holds_snapshot: bool = False
    # The server's roles decide who reads what (`scanwatch roles`); a file's readers are whoever may read it.
    has_roles: bool = False


class Engine:
    """The hooks; the defaults are DuckDB's dialect where PostgreSQL shares it."""

    name = "engine"
    # The engine's own SQL under `sql/` (its migrations, and whatever only it runs): `engines/<name>`.
    sql_folder = "engines/none"
    capabilities = Capabilities(single_writer=False, casts_can_fail=False, analyse_context=False)
    # Errors that mean another connection wrote the same thing first (DuckDB's optimistic transactions).
    conflicts: tuple[type[BaseException], ...] = ()
    # The error of a statement naming a table the history does not have (yet).
    missing_table: tuple[type[BaseException], ...] = ()

    # --- opening
    def connect(self, location: HistoryLocation, *, wait_seconds: float = 30.0) -> Connection:
        """A read-write connection (the schema not yet checked: `pipelines.storage.db.connect` does)."""
        raise NotImplementedError

    def connect_reader(self, location: HistoryLocation, *, wait_seconds: float = 0.0) -> Connection:
        """A connection for a brief read that never holds a writer back."""
        raise NotImplementedError

    def exists(self, location: HistoryLocation) -> bool:
        """Whether there may be a history to read at `location` without creating one (a server answers for
        itself when connected to)."""
        return True

    def writer_turns(self, location: HistoryLocation) -> contextlib.AbstractContextManager[None]:
        """Held around one writer's connection: where the engine takes one writer at a time, writers of this
        process take turns on it."""
        return contextlib.nullcontext()

    def keeping_writers(self) -> contextlib.AbstractContextManager[None]:
        """Held for a run's life: its thread's writers may share a connection in turn, instead of each opening
        one, where opening one costs the engine (a server process per PostgreSQL connection)."""
        return contextlib.nullcontext()

    def holds_history(self, location: HistoryLocation, schema: Callable[[Any], int]) -> bool:
        """Whether a history scanwatch wrote is at `location` (`schema(conn)` reads its schema version)."""
        return self.exists(location)

    def deadline(self, seconds: float, limit_seconds: float, where: str) -> contextlib.AbstractContextManager[Any]:
        """A sync's deadline (`limit_seconds`, SCANWATCH_SYNC_DEADLINE_SECONDS) kept on this engine's connections
        opened inside the block, `seconds` from now: each one is then cut, and the object the block gets says
        so (`expired`, `reason`, and `seconds`, when it cuts). None where no wait on the engine can outlast
        the process's own time limits."""
        return contextlib.nullcontext()

    @contextmanager
    def mapped(self, conn: Connection) -> Iterator[None]:
        """The driver's errors inside the block as scanwatch's own (HistoryQueryError), so that callers catch
        no driver's exception."""
        yield

    def snapshot_store(self, conn: Connection, milestone: Callable[[str], None] | None) -> SnapshotStore:
        """The metrics snapshot's store inside the history (`capabilities.holds_snapshot`)."""
        raise NotImplementedError(f"a {self.name} history holds no metrics snapshot")

    def polled_snapshot(self, location: HistoryLocation, limits: Limits | None = None) -> SnapshotStore:
        """The exporter's read-only view of the metrics snapshot the history holds (`capabilities.holds_snapshot`):
        it reads on a connection of its own, away from any scrape, and refuses to write. HistoryError where the
        history holds none."""
        raise HistoryError(f"a {self.name} history holds no metrics snapshot: serve the snapshot's folder "
                           "(--snapshot, SCANWATCH_SNAPSHOT)")

    # --- the read-only door, backups
    def read_only(self, location: HistoryLocation, sql: str, *, timeout: float | None, workspace: str | None,
                  as_writer: bool, wait: float, scope: Callable[[Any, str], None],
                  check_schema: Callable[[Any], None]) -> contextlib.AbstractContextManager[ReadResult]:
        """One read statement's columns and rows, the read-only promise kept (ReadRefused otherwise);
        `scope(conn, workspace)` shows one workspace's rows, `check_schema(conn)` refuses a history older than
        this code."""
        raise NotImplementedError

    def backup(self, location: HistoryLocation, dest: Path, *, wait: float) -> str:
        """A consistent copy of the history at `dest` (BackupFailed otherwise); returns what kind of file."""
        raise NotImplementedError

    def restore(self, location: HistoryLocation, backup: Path, *, replace: bool, wait: float,
                schema: Callable[[Any], int], newest: int) -> None:
        """`backup` (what `backup` wrote) as the history at `location` (BackupFailed otherwise); `schema(conn)`
        reads a history's schema version, `newest` is this code's."""
        raise NotImplementedError

    # --- statements and parameters
    def split(self, raw: Any, sql: str) -> Sequence[Statement]:
        raise NotImplementedError

    def execute(self, conn: Connection, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> Any:
        raise NotImplementedError

    def run_script(self, conn: Connection, sql: str) -> None:
        """Run a file of several statements without parameters (a migration)."""
        conn.execute(sql)

    # --- staging
    def stage_format(self, columns: Sequence[str]) -> StageFormat:
        """The lines this engine loads fastest, for stage files of an entity with `columns`; NDJSON unless the
        engine has a format of its own."""
        return NDJSON

    def load_stage(self, conn: Connection, table: str, columns: Sequence[str], stages: Sequence[StagedFile]) -> None:
        """Append the stage files to the temp table `table`, every column as text (its last column, the order
        of arrival, as a number); a key a record lacks is NULL."""
        raise NotImplementedError

    def cast(self, expression: str, sql_type: str, *, catching: bool = True) -> str:
        """`expression` (text) as `sql_type`; `catching`: NULL rather than an error when it does not fit."""
        raise NotImplementedError

    def typed(self, conn: Connection, create: Callable[[bool], str]) -> bool:
        """Run the statement that types a stage (`create(catching)` gives it); returns whether a value may have
        failed its cast, so the job generator knows whether to look for the values it left out."""
        conn.execute(create(True))
        return True

    def row_hash(self, columns: str) -> str:
        """An expression hashing the listed columns of one row: equal rows, equal hashes."""
        raise NotImplementedError

    # --- writers
    @contextmanager
    def migrating(self, conn: Connection) -> Iterator[None]:
        """Held while a history's schema is brought up to date, so two openers never both apply a migration."""
        yield

    def lock_workspace(self, conn: Connection, workspace_id: str | None) -> None:
        """Called first in every merge transaction: merges of one workspace take turns until it ends."""

    @contextmanager
    def holding_name(self, conn: Connection, label: str | None, workspace_id: str | None) -> Iterator[None]:
        """Held while a sync checks which workspace a followed name stands for and stores its account, so two
        first syncs of one name, or of one workspace under two names, never both find the binding free. One
        writer holds a DuckDB file whole already."""
        yield

    def analyse(self, conn: Connection, table: str) -> None:
        """Let the planner know a freshly filled temp table (`capabilities.analyse_context`)."""

    def refresh_statistics(self, conn: Connection, tables: Sequence[str]) -> None:
        """After a merge has committed: bring the planner's statistics of the history `tables` it wrote up to
        date where they no longer describe them (a no-op where the engine keeps none to plan with)."""

    def planning_whole_sets(self, conn: Connection) -> None:
        """Called first in a transaction of whole-workspace set operations (a reconstruction): plan them for the
        workspace's rows at any size, whatever the statistics last saw of it (a no-op where the planner never
        trades that for a per-row plan)."""

    # --- readers
    # Begins a transaction whose statements all see one committed state (a snapshot's tables agree).
    begin_read = "BEGIN TRANSACTION"

    @contextmanager
    def session(self, conn: Connection) -> Iterator[Connection]:
        """The same history on a connection whose transactions never touch one the caller holds open."""
        raise NotImplementedError

    def read_committed(self, conn: Connection, work: Callable[[Connection], T], *, beside: bool = True) -> T:
        """`work` on a session of its own in one read transaction: every statement sees the same committed
        state, even if a writer commits meanwhile, and a transaction the caller holds open is never touched
        (or aborted). An engine with one writer at a time lets the others write meanwhile where it can;
        `beside` False keeps the caller's turn, for a read whose result must be written before any other
        writer's (every part of the snapshot at once, which a part written meanwhile must not precede)."""
        with self.session(conn) as session:
            session.execute(self.begin_read)
            try:
                return work(session)
            finally:
                with contextlib.suppress(Exception):  # a connection lost meanwhile rolled back by itself
                    session.execute("ROLLBACK")

    def grant_views(self, conn: Connection, views: Sequence[str]) -> None:
        """Let the views layer's readers read `views` (called whenever the writer opens the history)."""

    def views_granted(self, conn: Connection, views: Sequence[str]) -> bool:
        """Whether `grant_views` has nothing left to grant (a read)."""
        return True

    def layer_current(self, conn: Connection) -> bool:
        """Whether what `migrating` keeps current besides the schema (PostgreSQL's compatibility layer) is
        current (a read)."""
        return True


_SPLIT: dict[tuple[str, str], tuple[Statement, ...]] = {}
_SPLIT_KEPT = 1024


class Connection:
    """One open history: the driver's connection and the engine that speaks to it.

    `execute` takes the `$name` parameters of scanwatch's files on every engine; whatever else the code asks of
    a connection (DuckDB's `cursor()`, `interrupt()`) goes to the driver's own.
    """

    def __init__(self, raw: Any, engine: Engine, location: HistoryLocation | None = None) -> None:
        self.raw = raw
        self.engine = engine
        self.location = location or HistoryLocation(":memory:")

    @property
    def label(self) -> str:
        """The history as it may be shown: a path, or a URL without its password."""
        return self.location.masked

    def execute(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> Any:
        return self.engine.execute(self, sql, params)

    def split_statements(self, sql: str) -> Sequence[Statement]:
        """The statements of one of scanwatch's SQL files, split once per text and engine: an unchanged
        workspace runs the same few dozen files about 140 times, and DuckDB's parser holds the interpreter's
        lock while it splits (a tenth of an unchanged refresh's lock, docs/benchmarks.md)."""
        key = (self.engine.name, sql)
        found = _SPLIT.get(key)
        if found is None:
            if len(_SPLIT) >= _SPLIT_KEPT:  # the files are a few hundred texts: a bound, never reached in use
                _SPLIT.clear()
            found = _SPLIT[key] = tuple(self.engine.split(self.raw, sql))
        return found

    def close(self) -> None:
        self.raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{self.engine.name} history {self.label}>"
