"""PostgreSQL, the history several machines share: writers of different workspaces at once, readers never
blocked (MVCC), the server's own transactions and keys.

Only what PostgreSQL says differently from the SQL files lives here: psycopg's `%(name)s` parameters
(translated from the files' `$name`, bound client-side so a parameter's type comes from where it is used,
as in DuckDB), the statements of a file split by `sqltext` (imported when a statement first runs: the
exporter takes only the snapshot store from this engine, and SQLGlot costs it a tenth of a second), stage
files sent with COPY (`stage_format.py`), plain casts tried before catching ones, a row hash, advisory locks
so that two openers never migrate at once, and a row lock a reader cannot take so that two syncs of one
workspace merge in turn. The DuckDB functions the files use and PostgreSQL lacks are created from
`sql/engines/postgres/compat.sql` (`sql_client.py`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from pipelines.core.history_location import HistoryLocation
from pipelines.core.sqlfiles import read_sql
from pipelines.storage.destinations.base import Capabilities, Connection, Engine, ReadResult, Statement
from pipelines.storage.destinations.errors import BackupFailed, HistoryUnavailableError
from pipelines.storage.destinations.impl.postgres import deadline, reuse
from pipelines.storage.destinations.impl.postgres.errors import (
    DATA_ERROR,
    LOCK_NOT_AVAILABLE,
    MISSING_TABLE,
    lost_server,
)
from pipelines.storage.destinations.impl.postgres.errors import mapped as errors_mapped
from pipelines.storage.destinations.impl.postgres.sql_client import (
    STALE_STATISTICS_FILE,
    VIEWS_ROLE,
    VIEWS_UNGRANTED_FILE,
    WORKSPACE_LOCK_FILE,
    compat_digest,
    compat_held,
    connect,
    install_compat,
    quote,
)
from pipelines.storage.destinations.impl.postgres.stage_format import CopyText
from pipelines.storage.destinations.stage_format import StagedFile, StageFormat

if TYPE_CHECKING:
    from pipelines.snapshot.format import Limits
    from pipelines.snapshot.store import SnapshotStore

# The catching casts of the compatibility layer, one per type an API field has (pipelines/storage/entities.py).
_CATCHING = {"INTEGER": "scanwatch_try_integer", "DOUBLE PRECISION": "scanwatch_try_double",
             "BOOLEAN": "scanwatch_try_boolean", "TIMESTAMPTZ": "scanwatch_try_timestamptz",
             "JSON": "scanwatch_try_json"}


class PostgresEngine(Engine):
    name = "postgres"
    sql_folder = "engines/postgres"
    capabilities = Capabilities(single_writer=False, casts_can_fail=True, analyse_context=True,
                                merge_group_bytes=256 * 1024 * 1024, location_is_secret=True,
                                holds_snapshot=True, has_roles=True)
    missing_table = MISSING_TABLE

    def open(self, location: HistoryLocation, *, writer: bool = True) -> Connection:
        """A connection in autocommit mode (transactions are explicit, as on DuckDB), in UTC; a writer's is
        refused at once when the server only reads (a hot standby, or `default_transaction_read_only`), and
        is the thread's previous writer's when that one was handed back whole inside `keeping_writers`."""
        if not writer:
            return Connection(connect(location, writer=False), self, location)
        return _KeptConnection(reuse.take(location) or connect(location), self, location)

    def connect(self, location: HistoryLocation, *, wait_seconds: float = 30.0) -> Connection:
        return self.open(location)

    def keeping_writers(self) -> contextlib.AbstractContextManager[None]:
        """A run's writers take turns on one connection of its thread (`reuse.py`): a server process, its
        setup and its catalogue caches once per run instead of at each of its ~9 opens."""
        return reuse.keeping()

    def connect_reader(self, location: HistoryLocation, *, wait_seconds: float = 0.0) -> Connection:
        """A connection that never waits for a writer (MVCC)."""
        return self.open(location, writer=False)

    def holds_history(self, location: HistoryLocation, schema: Callable[[Any], int]) -> bool:
        """An empty database is no history: the schema says."""
        with contextlib.closing(self.connect_reader(location)) as conn:
            return schema(conn) > 0

    def deadline(self, seconds: float, limit_seconds: float, where: str) -> contextlib.AbstractContextManager[Any]:
        """A peer frozen in place keeps a connection open past any timeout of libpq or the server: this side
        cuts it (`deadline.py`), a grace after the sync's own deadline, by which the service client has
        stopped by itself."""
        return deadline.armed(seconds + deadline.GRACE_SECONDS, deadline.sync_reason(limit_seconds, where))

    @contextmanager
    def mapped(self, conn: Connection) -> Iterator[None]:
        with errors_mapped(conn.location, f"the PostgreSQL history at {conn.label} failed a statement"):
            yield

    def snapshot_store(self, conn: Connection, milestone: Callable[[str], None] | None) -> SnapshotStore:
        """`snapshot_parts`, written on the run's own connection (`snapshot_store.py`)."""
        from pipelines.storage.destinations.impl.postgres.snapshot_store import DatabaseStore

        return DatabaseStore(conn.raw, conn.location, milestone=milestone)

    def polled_snapshot(self, location: HistoryLocation, limits: Limits | None = None) -> SnapshotStore:
        """`snapshot_parts`, polled by a thread on a read-only connection of its own (`snapshot_store.py`): a
        scrape never waits for the server, and the password stays with libpq."""
        from pipelines.storage.destinations.impl.postgres.snapshot_store import PolledStore

        return PolledStore(location, limits=limits)

    # --- the read-only door, backups
    def read_only(self, location: HistoryLocation, sql: str, *, timeout: float | None, workspace: str | None,
                  as_writer: bool, wait: float, scope: Callable[[Any, str], None],
                  check_schema: Callable[[Any], None]) -> contextlib.AbstractContextManager[ReadResult]:
        """The server keeps the promise (`read_door.py`); a history of an older schema is read as it is."""
        from pipelines.storage.destinations.impl.postgres.read_door import opened

        return opened(location, sql, timeout=timeout, workspace=workspace, as_writer=as_writer, scope=scope,
                      connect=self.connect_reader)

    def backup(self, location: HistoryLocation, dest: Path, *, wait: float) -> str:
        from pipelines.storage.destinations.impl.postgres.backup import dump

        dump(location, dest)
        return "pg_dump archive"

    def restore(self, location: HistoryLocation, backup: Path, *, replace: bool, wait: float,
                schema: Callable[[Any], int], newest: int) -> None:
        from pipelines.storage.destinations.impl.postgres import backup as pg_backup

        def holds_history() -> bool:
            try:
                return self.holds_history(location, schema)
            except HistoryUnavailableError as exc:
                raise BackupFailed(str(exc)) from None

        pg_backup.restore(location, backup, replace, holds_history)

    # --- statements and parameters
    def split(self, raw: Any, sql: str) -> Sequence[Statement]:
        from pipelines.storage.destinations.impl.postgres.sqltext import split

        return split(sql)

    def execute(self, conn: Connection, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> Any:
        from pipelines.storage.destinations.impl.postgres.sqltext import to_pyformat

        with lost_server(conn):
            if params is None:
                return conn.raw.execute(sql)
            if isinstance(params, Mapping):
                return conn.raw.execute(to_pyformat(sql), params)
            return conn.raw.execute(to_pyformat(sql, positional=True), list(params))

    def run_script(self, conn: Connection, sql: str) -> None:
        """Each statement in turn (migrations carry tables only: views are the views layer's)."""
        for statement in self.split(conn.raw, sql):
            conn.execute(statement.query)

    # --- staging
    def stage_format(self, columns: Sequence[str]) -> StageFormat:
        return CopyText(columns)

    def load_stage(self, conn: Connection, table: str, columns: Sequence[str], stages: Sequence[StagedFile]) -> None:
        """Files in this engine's format are sent as they are; any other (NDJSON, the default of a stage file)
        is turned into the same lines here. PostgreSQL's own json_to_record took 45 us a row, three times what
        the lines cost in Python."""
        *text, seq = columns
        mine = CopyText(text)
        names = ", ".join(quote(c) for c in columns)
        copy_sql = f"COPY {table} ({names}) FROM STDIN (FORMAT text, ENCODING 'UTF8')"
        with lost_server(conn), conn.raw.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for stage in stages:
                if stage.format == mine:
                    with open(stage.path, "rb") as fh:
                        while block := fh.read(1 << 20):
                            copy.write(block)
                    continue
                for raw in stage.lines():
                    record = json.loads(raw)
                    copy.write(mine.line(record, record.get(seq), b""))

    def cast(self, expression: str, sql_type: str, *, catching: bool = True) -> str:
        return f"{_CATCHING[sql_type]}({expression})" if catching else f"CAST({expression} AS {sql_type})"

    def typed(self, conn: Connection, create: Callable[[bool], str]) -> bool:
        """Plain casts first, at full speed; when one value does not fit, the whole statement again with the
        compatibility layer's catching casts. Returns whether the catching casts were needed."""
        conn.execute("SAVEPOINT scanwatch_typed")
        try:
            conn.execute(create(False))
            caught = False
        except DATA_ERROR:
            conn.execute("ROLLBACK TO SAVEPOINT scanwatch_typed")
            conn.execute(create(True))
            caught = True
        conn.execute("RELEASE SAVEPOINT scanwatch_typed")
        return caught

    def row_hash(self, columns: str) -> str:
        return f"hashtextextended(CAST(ROW({columns}) AS text), 0)"

    def analyse(self, conn: Connection, table: str) -> None:
        conn.execute(f"ANALYZE {table}")

    def refresh_statistics(self, conn: Connection, tables: Sequence[str]) -> None:
        """ANALYZE the tables whose statistics autovacuum would refresh in its next round, now. Without them the
        planner guessed the small tables' rows from their pages (a fresh history's `projects` and `accounts`
        change by fewer rows a sync than autovacuum's threshold, and stayed unanalysed for many syncs), and
        the reads right after a first sync planned 390k new issues as none: cookbook queries 2 to 10 times
        slower. The session's own counts are sent to the statistics first, or a merge committed a moment
        ago would not show. A table another writer (or autovacuum) is analysing is left to it: no sync waits
        for another's ANALYZE."""
        conn.execute("SELECT pg_stat_force_next_flush()")
        stale = [name for (name,) in conn.execute(read_sql(STALE_STATISTICS_FILE), {"tables": list(tables)}).fetchall()]
        for name in stale:
            conn.execute("BEGIN")
            try:
                conn.execute("SET LOCAL lock_timeout = '100ms'")
                conn.execute(f"ANALYZE {quote(name)}")
            except LOCK_NOT_AVAILABLE:
                conn.execute("ROLLBACK")
                continue
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def planning_whole_sets(self, conn: Connection) -> None:
        """No nested loops for the rest of the transaction. The statistics describe a workspace's rows only from
        the ANALYZE after its first sync, and a workspace added to a history of a few others (whose values
        fill the column's most-common list) is estimated at one row until then: the reconstruction of its
        past then ran each of its window aggregates again for every issue (30 s of the server for 320
        issues, the square of its size). Its statements join whole workspaces, which hash joins serve at any
        size; a merge's statistics refresh (`refresh_statistics`) leaves a workspace under a tenth of the
        table unseen, by autovacuum's own rule."""
        conn.execute("SET LOCAL enable_nestloop = off")

    # --- readers
    # READ COMMITTED gives each statement its own snapshot: a read of several statements asks for one.
    begin_read = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"

    @contextmanager
    def session(self, conn: Connection) -> Iterator[Connection]:
        """The connection itself when no transaction is open on it (the usual case: a step between its
        transactions), else a second connection to the same database."""
        if conn.raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            yield conn
            return
        own = self.open(conn.location)
        try:
            yield own
        finally:
            own.close()

    # --- writers
    @contextmanager
    def migrating(self, conn: Connection) -> Iterator[None]:
        """A session advisory lock while the schema is brought up to date (released if the process dies), and
        the compatibility layer created or replaced when this scanwatch's copy differs from the history's."""
        key = "scanwatch migrate"
        conn.execute("SELECT pg_advisory_lock(hashtextextended($key, 0))", {"key": key})
        try:
            install_compat(conn)
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended($key, 0))", {"key": key})

    def grant_views(self, conn: Connection, views: Sequence[str]) -> None:
        """SELECT on every view of the layer to the role `scanwatch_views`, when the server has one: the role of
        Grafana's data source is made a member of it, and reads the views and nothing else (a view reads its
        tables with its owner's rights). Recreating a view drops what was granted on it, so the writer grants
        again whenever the role lacks one; one read when nothing is missing."""
        missing = conn.execute(read_sql(VIEWS_UNGRANTED_FILE), {"role": VIEWS_ROLE, "views": list(views)})
        names = [name for (name,) in missing.fetchall()]
        if names:
            conn.execute(f"GRANT SELECT ON {', '.join(quote(n) for n in names)} TO {quote(VIEWS_ROLE)}")

    def views_granted(self, conn: Connection, views: Sequence[str]) -> bool:
        return not conn.execute(read_sql(VIEWS_UNGRANTED_FILE),
                                {"role": VIEWS_ROLE, "views": list(views)}).fetchall()

    def layer_current(self, conn: Connection) -> bool:
        return compat_held(conn) == compat_digest()

    def lock_workspace(self, conn: Connection, workspace_id: str | None) -> None:
        """The workspace's row of `scanwatch_workspace_locks`, locked until the transaction ends: a lock no
        reader can take (sql/engines/postgres/locks.sql), so no reader can hold a workspace's syncs."""
        for statement in self.split(conn.raw, read_sql(WORKSPACE_LOCK_FILE)):
            conn.execute(statement.query, {"key": workspace_id or ""})

    @contextmanager
    def holding_name(self, conn: Connection, label: str | None, workspace_id: str | None) -> Iterator[None]:
        """Session advisory locks on the followed name (the unnamed workspace's too) and then on the workspace its
        key answers for, across the binding's check and the account's own merge transaction: two first syncs
        of one name, or of one workspace under two names, never both find the binding free. Always the name
        first, so no two syncs wait on each other in a circle; released if the process dies."""
        keys = [{"key": f"scanwatch name {'' if label is None else label}"},
                {"key": f"scanwatch binding {workspace_id or ''}"}]
        for key in keys:
            conn.execute("SELECT pg_advisory_lock(hashtextextended($key, 0))", key)
        try:
            yield
        finally:
            for key in reversed(keys):
                conn.execute("SELECT pg_advisory_unlock(hashtextextended($key, 0))", key)


class _KeptConnection(Connection):
    """A writer's connection, handed back on close for the thread's next writer (`reuse.py`): once, so that
    a second close never hands back what that next writer holds."""

    released = False

    def close(self) -> None:
        if not self.released:
            self.released = True
            reuse.give_back(self.raw, self.location)


POSTGRES = PostgresEngine()
