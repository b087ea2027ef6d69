"""What every history engine does the same way, and the few hooks where DuckDB and PostgreSQL differ.

Shaped like dlt's destinations: one job generator (`pipelines/storage/merge.py` and `upsert.py` compose the
staging, unchanged test, events and upsert of each entity) runs on every engine, and an engine overrides only
what its database says differently: its capabilities, the parameter style, splitting a file of several
statements, loading stage files, the typed casts, the row hash of the unchanged test, and how writers of one
workspace take turns. The SQL files under `sql/` are one text that both engines run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.engines.sqltext import Statement
from pipelines.storage.stage import NDJSON, StageFile, StageFormat


class HistoryUnavailableError(RuntimeError):
    """The history's server cannot be reached or used; the message says what to fix, its URL masked."""


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


class Engine:
    """The hooks; the defaults are DuckDB's dialect where PostgreSQL shares it."""

    name = "engine"
    capabilities = Capabilities(single_writer=False, casts_can_fail=False, analyse_context=False)
    # Errors that mean another connection wrote the same thing first (DuckDB's optimistic transactions).
    conflicts: tuple[type[BaseException], ...] = ()
    # The error of a statement naming a table the history does not have (yet).
    missing_table: tuple[type[BaseException], ...] = ()

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

    def load_stage(self, conn: Connection, table: str, columns: Sequence[str], stages: Sequence[StageFile]) -> None:
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

    # --- readers
    # Begins a transaction whose statements all see one committed state (a snapshot's tables agree).
    begin_read = "BEGIN TRANSACTION"

    @contextmanager
    def session(self, conn: Connection) -> Iterator[Connection]:
        """The same history on a connection whose transactions never touch one the caller holds open."""
        raise NotImplementedError

    def grant_views(self, conn: Connection, views: Sequence[str]) -> None:
        """Let the views layer's readers read `views` (called whenever the writer opens the history)."""

    def views_granted(self, conn: Connection, views: Sequence[str]) -> bool:
        """Whether `grant_views` has nothing left to grant (a read)."""
        return True

    def layer_current(self, conn: Connection) -> bool:
        """Whether what `migrating` keeps current besides the schema (PostgreSQL's compatibility layer) is
        current (a read)."""
        return True


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
        return self.engine.split(self.raw, sql)

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
