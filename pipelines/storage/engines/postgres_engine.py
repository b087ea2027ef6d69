"""PostgreSQL, the history several machines share: writers of different workspaces at once, readers never
blocked (MVCC), the server's own transactions and keys.

Only what PostgreSQL says differently from the SQL files lives here: psycopg's `%(name)s` parameters
(translated from the files' `$name`, bound client-side so a parameter's type comes from where it is used,
as in DuckDB), the statements of a file split by `sqltext`, stage files sent with COPY and parsed by
`json_to_record`, plain casts tried before catching ones, a row hash, advisory locks so that two openers
never migrate at once, and a row lock a reader cannot take so that two syncs of one workspace merge in
turn. The DuckDB functions the files use and PostgreSQL lacks are created from `sql/storage/postgres_compat.sql`.

The URL's password never leaves: libpq reads it (or `PGPASSWORD`, or `.pgpass`), and every message built
here shows the URL masked and scrubs what the driver wrote.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.types.string
from psycopg import conninfo, errors

from pipelines.core.history_location import HistoryLocation
from pipelines.core.sqlfiles import read_sql
from pipelines.storage.engines import deadline
from pipelines.storage.engines.base import Capabilities, Connection, Engine, HistoryUnavailableError
from pipelines.storage.engines.sqltext import Statement, split, to_pyformat
from pipelines.storage.stage import CopyText, StageFile, StageFormat

CONNECT_TIMEOUT_SECONDS = 10  # unless the URL says otherwise (connect_timeout=...)
# A path that dies is noticed by libpq within about 20 s: keepalive probes after 10 s idle, every 3 s, 3 unanswered
# end the connection, and so does data left unacknowledged for 30 s. A frozen peer still ACKs: `deadline` ends that.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 3, "keepalives_count": 3,
              "tcp_user_timeout": 30_000}
# A writer's bounds on the server: no statement and no lock wait (another sync of the workspace, a migration)
# outlives an hour, and a transaction left idle by a client that went silent ends after ten minutes, with its
# locks. A merge takes seconds; a sync's own deadline (SCANWATCH_SYNC_DEADLINE_SECONDS) is kept client-side.
WRITER_SETTINGS = {"statement_timeout": "1h", "lock_timeout": "1h", "idle_in_transaction_session_timeout": "10min"}
COMPAT_FILE = "storage/postgres_compat.sql"
LOCKS_FILE = "storage/postgres_locks.sql"  # installed with the compatibility layer, under one digest
WORKSPACE_LOCK_FILE = "storage/workspace_lock.sql"
STALE_STATISTICS_FILE = "storage/statistics_stale.sql"
# The group role whose members (Grafana's data source) may read the views layer and nothing else.
VIEWS_ROLE = "scanwatch_views"
# The catching casts of the compatibility layer, one per type an API field has (pipelines/storage/entities.py).
_CATCHING = {"INTEGER": "scanwatch_try_integer", "DOUBLE PRECISION": "scanwatch_try_double",
             "BOOLEAN": "scanwatch_try_boolean", "TIMESTAMPTZ": "scanwatch_try_timestamptz",
             "JSON": "scanwatch_try_json"}


def message_lines(exc: BaseException) -> list[str]:
    """The driver's message as lines, without the server's position lines (`LINE 1: ...` and a bare `^`),
    which say nothing on a line of their own."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return [ln for ln in lines if not ln.startswith("LINE ") and set(ln) != {"^"}]


def _reason(exc: BaseException, location: HistoryLocation) -> str:
    """The driver's message, its last meaningful line (libpq puts the cause last), without secrets."""
    lines = message_lines(exc)
    text = lines[-1] if lines else type(exc).__name__
    text = re.sub(r'^(connection failed: |connection to server (?:at|on socket) .*? failed: |FATAL:\s+|ERROR:\s+)+',
                  "", text)
    return location.scrub(text)


# libpq's and the server's words for a server that cannot be reached at all (not one that answered "no").
_UNREACHABLE = ("connection refused", "could not connect", "timeout expired", "could not translate",
                "no route to host", "network is unreachable", "server closed the connection",
                "the database system is starting up", "the database system is shutting down",
                "name or service not known", "failed to resolve host", "no such file or directory")


def describe_failure(exc: BaseException, location: HistoryLocation) -> str:
    """One line for a failed connection: what happened and what to do, the URL masked. The server's answer is
    matched first: libpq's framing ("connection to server at ... failed") is around every one of them."""
    where = location.masked
    reason = _reason(exc, location)
    low = str(exc).lower()
    if "password authentication failed" in low or "no password supplied" in low:
        return (f"the PostgreSQL server refused the password for the history at {where} ({reason}): give it in "
                "SCANWATCH_DB, PGPASSWORD or ~/.pgpass")
    if re.search(r'database ".*" does not exist', low):
        return (f"the PostgreSQL server has no such database for the history at {where} ({reason}): create it "
                "(createdb), or fix the database name in SCANWATCH_DB")
    if re.search(r'role ".*" does not exist', low):
        return f"the PostgreSQL server has no such role for the history at {where} ({reason}): fix SCANWATCH_DB"
    if re.search(r'role ".*" is not permitted to log in', low):
        return (f"the role of the history at {where} may not log in ({reason}): give it LOGIN (ALTER ROLE ... "
                "LOGIN) or name another role in SCANWATCH_DB")
    if any(s in low for s in _UNREACHABLE):
        return (f"cannot reach the PostgreSQL server of the history at {where} ({reason}): check that it runs and "
                "that the host and port in SCANWATCH_DB are right")
    return f"cannot open the PostgreSQL history at {where}: {reason}"


@contextmanager
def lost_server(conn: Connection) -> Iterator[None]:
    """A connection the server dropped (a restart, a failover, a network cut) is one line: the server has
    rolled back the open transaction, so nothing of it is half-written."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raw = conn.raw
        if (cut := deadline.expired()) is not None:  # this side ended the wait: the deadline is the cause
            raise HistoryUnavailableError(cut) from None
        if raw.closed or raw.broken or isinstance(exc, (errors.AdminShutdown, errors.CrashShutdown,
                                                             errors.CannotConnectNow)):
            raise HistoryUnavailableError(
                f"lost the PostgreSQL server of the history at {conn.label} ({_reason(exc, conn.location)}): "
                "what this step was writing was rolled back; the next sync catches up") from None
        raise


class PostgresEngine(Engine):
    name = "postgres"
    capabilities = Capabilities(single_writer=False, casts_can_fail=True, analyse_context=True,
                                merge_group_bytes=256 * 1024 * 1024)
    missing_table = (errors.UndefinedTable,)

    def open(self, location: HistoryLocation, *, writer: bool = True) -> Connection:
        """A connection in autocommit mode (transactions are explicit, as on DuckDB), in UTC; a writer's is
        refused at once when the server only reads (a hot standby, or `default_transaction_read_only`)."""
        options: dict[str, Any] = {"autocommit": True, "cursor_factory": psycopg.ClientCursor,
                                   "application_name": "scanwatch"}
        try:
            given = conninfo.conninfo_to_dict(location.url)
        except psycopg.Error as exc:
            raise HistoryUnavailableError(f"SCANWATCH_DB is not a valid PostgreSQL URL ({location.masked}): "
                                          f"{_reason(exc, location)}") from None
        for name, value in {"connect_timeout": CONNECT_TIMEOUT_SECONDS, **KEEPALIVES}.items():
            if name not in given:  # what the URL sets wins
                options[name] = value
        if (late := deadline.expired()) is not None:
            raise HistoryUnavailableError(late)
        try:
            raw = psycopg.connect(location.url, **options)
        except psycopg.Error as exc:
            raise HistoryUnavailableError(describe_failure(exc, location)) from None
        deadline.track(raw)
        # JSON columns arrive as their text, as DuckDB gives them, whichever engine a reader asks.
        for name in ("json", "jsonb"):
            raw.adapters.register_loader(name, psycopg.types.string.TextLoader)
        try:
            raw.execute("SET TimeZone = 'UTC'")
            # A merge's statements are short and planned once: compiling them (JIT, on above a cost estimate
            # that a large stage reaches) took longer than running them, 4.4 s of a 4.9 s event diff of 20k
            # issues.
            raw.execute("SET jit = off")
            # A merge group's sorts and hashes (the latest sighting of each id, the joins with the history) fit
            # in memory instead of spilling to temp files: the server's memory, per writer, for a statement.
            raw.execute("SET work_mem = '64MB'")
            if writer:
                for name, setting in WRITER_SETTINGS.items():
                    raw.execute(f"SET {name} = '{setting}'")
                standby, read_only = raw.execute(
                    "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'").fetchall()[0]
                if standby or read_only:
                    what = "a hot standby (in recovery)" if standby else "read-only (default_transaction_read_only)"
                    raise HistoryUnavailableError(
                        f"the PostgreSQL server of the history at {location.masked} is {what} and takes no writes: "
                        "point SCANWATCH_DB at the primary")
        except psycopg.Error as exc:
            raw.close()
            raise HistoryUnavailableError(describe_failure(exc, location)) from None
        except BaseException:
            raw.close()
            raise
        return Connection(raw, self, location)

    # --- statements and parameters
    def split(self, raw: Any, sql: str) -> Sequence[Statement]:
        return split(sql)

    def execute(self, conn: Connection, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> Any:
        with lost_server(conn):
            if params is None:
                return conn.raw.execute(sql)
            if isinstance(params, Mapping):
                return conn.raw.execute(to_pyformat(sql), params)
            return conn.raw.execute(to_pyformat(sql, positional=True), list(params))

    def run_script(self, conn: Connection, sql: str) -> None:
        """Each statement in turn (migrations carry tables only: views are the views layer's)."""
        for statement in split(sql):
            conn.execute(statement.query)

    # --- staging
    def stage_format(self, columns: Sequence[str]) -> StageFormat:
        return CopyText(columns)

    def load_stage(self, conn: Connection, table: str, columns: Sequence[str], stages: Sequence[StageFile]) -> None:
        """Files in this engine's format are sent as they are; any other (NDJSON, the default of a stage file)
        is turned into the same lines here. PostgreSQL's own json_to_record took 45 us a row, three times what
        the lines cost in Python."""
        *text, seq = columns
        mine = CopyText(text)
        names = ", ".join(_quote(c) for c in columns)
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
        except errors.DataError:
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
                conn.execute(f"ANALYZE {_quote(name)}")
            except errors.LockNotAvailable:
                conn.execute("ROLLBACK")
                continue
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

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
            _install_compat(conn)
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended($key, 0))", {"key": key})

    def grant_views(self, conn: Connection, views: Sequence[str]) -> None:
        """SELECT on every view of the layer to the role `scanwatch_views`, when the server has one: the role of
        Grafana's data source is made a member of it, and reads the views and nothing else (a view reads its
        tables with its owner's rights). Recreating a view drops what was granted on it, so the writer grants
        again whenever the role lacks one; one read when nothing is missing."""
        missing = conn.execute(read_sql("storage/views_ungranted.sql"), {"role": VIEWS_ROLE, "views": list(views)})
        names = [name for (name,) in missing.fetchall()]
        if names:
            conn.execute(f"GRANT SELECT ON {', '.join(_quote(n) for n in names)} TO {_quote(VIEWS_ROLE)}")

    def views_granted(self, conn: Connection, views: Sequence[str]) -> bool:
        return not conn.execute(read_sql("storage/views_ungranted.sql"),
                                {"role": VIEWS_ROLE, "views": list(views)}).fetchall()

    def layer_current(self, conn: Connection) -> bool:
        return _compat_held(conn) == _compat_digest()

    def lock_workspace(self, conn: Connection, workspace_id: str | None) -> None:
        """The workspace's row of `scanwatch_workspace_locks`, locked until the transaction ends: a lock no
        reader can take (sql/storage/postgres_locks.sql), so no reader can hold a workspace's syncs."""
        for statement in split(read_sql(WORKSPACE_LOCK_FILE)):
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


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _compat_text() -> str:
    return read_sql(COMPAT_FILE) + "\n" + read_sql(LOCKS_FILE)


def _compat_digest() -> str:
    return "scanwatch compat " + hashlib.sha256(_compat_text().encode()).hexdigest()[:16]


def _compat_held(conn: Connection) -> str | None:
    held: str | None = conn.execute(
        "SELECT obj_description(to_regprocedure('epoch(timestamptz)'), 'pg_proc')").fetchone()[0]
    return held


def _install_compat(conn: Connection) -> None:
    """`sql/storage/postgres_compat.sql`, applied when its digest (kept as the comment of `epoch`) differs."""
    text = _compat_text()
    digest = _compat_digest()
    if _compat_held(conn) == digest:
        return
    conn.execute("BEGIN")
    try:
        conn.execute(text)
        conn.execute("COMMENT ON FUNCTION epoch(timestamptz) IS $digest", {"digest": digest})
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


POSTGRES = PostgresEngine()
