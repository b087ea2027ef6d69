"""The history on both engines, for the tests that prove engine behaviour (merges, world shifts, checks,
crashes, many writers): a history is a DuckDB file's path or a PostgreSQL database's URL, exactly what
`SCANWATCH_DB` holds, and it is read here with each engine's own driver, never through scanwatch's code.

The `engine_db` fixture (tests/conftest.py) yields one of each; tests that only need one engine keep
DuckDB's `tmp_path / "history.duckdb"`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENGINES = ("duckdb", "postgres")

# Columns that record when scanwatch looked, not what the service said; two syncs never share them.
OBSERVED = ("first_observed_at", "last_observed_at", "observed_at", "removed_at", "gone_at", "hidden_at",
            "issues_synced_at", "scans_synced_at", "full_reconcile_at", "applied_at")

# The history's tables and an order that makes two dumps comparable row by row.
TABLES: dict[str, str] = {
    "accounts": "workspace_id", "projects": "id", "targets": "id", "scans": "id", "issues": "id",
    "issue_events": "issue_id, event, from_value, to_value", "score_snapshots": "project_id, target_id, score",
    "quota_snapshots": "quota, used", "scans_gone": "scan_id", "project_sync_state": "project_id",
    "ingest_warnings": "entity, entity_id, field, value",
}


def is_postgres(db: str | Path) -> bool:
    return str(db).startswith(("postgresql://", "postgres://"))


@dataclass(frozen=True)
class Backend:
    """One engine as the tests reach it. What a test would otherwise ask the engine's name for is answered
    here, once: how to make a fresh history, the driver's spelling, and where the two engines' contracts
    differ on purpose (each capability says why), so a test body is one path on both."""

    name: str
    # The driver's positional placeholder (DuckDB's `?`, psycopg's `%s`).
    mark: str
    # The history keeps the primary keys of `issues`, `issue_events` and `scans`, so the server refuses a second
    # row of an id. DuckDB's history dropped them (sql/engines/duckdb/migrations/011_unkeyed_history.sql and
    # 022_unkeyed_scans.sql: their ART index held the whole history in a sync's memory); the `issue_ids_unique`
    # and `scan_ids_unique` checks watch there instead.
    keeps_keys: bool
    # What a U+0000 in the service's text is stored as: PostgreSQL's text cannot hold it, the engine writes
    # U+FFFD; DuckDB keeps it.
    nul: str
    # A backup waits for a writer that holds the history, and copies what it committed: DuckDB's writer locks the
    # file. PostgreSQL's pg_dump reads the last committed state at once (MVCC) and waits for no one.
    backup_waits_for_writer: bool
    # The best-hidden write the engine's SQL can spell as a read, for the read door to refuse: PostgreSQL writes
    # inside a WITH (a data-modifying CTE); DuckDB has no such thing, so a plain DELETE.
    hidden_write: str

    def fresh(self, request: Any, file: Path) -> str:
        """A new, empty history as `SCANWATCH_DB` names it: the DuckDB file `file`, or a new database of the
        session's PostgreSQL server (`pg_server`), which `drop` removes."""
        if self.name == "duckdb":
            return str(file)
        server = request.getfixturevalue("pg_server")
        return server.url(server.create_database())

    def drop(self, request: Any, db: str | Path) -> None:
        """Remove a history `fresh` made on the server (a DuckDB file goes with its temporary folder)."""
        if self.name == "postgres":
            request.getfixturevalue("pg_server").drop_database(str(db).rsplit("/", 1)[-1])


    def copy(self, request: Any, db: str | Path, file: Path) -> str:
        """A copy of the history `db` that a test may change: the DuckDB file copied to `file`, or a new database
        of the session's server made from `db` as its template (nobody may be connected to it)."""
        if self.name == "duckdb":
            file.write_bytes(Path(db).read_bytes())
            return str(file)
        server = request.getfixturevalue("pg_server")
        return server.url(server.create_database(template=str(db).rsplit("/", 1)[1]))

    def as_reader(self, request: Any, db: str | Path) -> str | Path:
        """`db` as the cookbook's readers are given it: a DuckDB file as it is (its readers are whoever may read
        the file); a PostgreSQL database, built by the superuser, as the reader role of `scanwatch roles` (the
        read door refuses a role that could write)."""
        if self.name == "duckdb":
            return db
        from tests.postgres.roles import reader_url

        return reader_url(request.getfixturevalue("pg_server"), str(db))


BACKENDS = {"duckdb": Backend("duckdb", mark="?", keeps_keys=False, nul="\x00", backup_waits_for_writer=True,
                              hidden_write="DELETE FROM issues"),
            "postgres": Backend("postgres", mark="%s", keeps_keys=True, nul="\ufffd", backup_waits_for_writer=False,
                                hidden_write="WITH gone AS (DELETE FROM issues RETURNING id) "
                                             "SELECT count(*) FROM gone")}


def backend_of(db: Any) -> Backend:
    """The backend of a history (a path or a URL) or of one of scanwatch's open connections to it."""
    engine = getattr(db, "engine", None)
    if engine is not None:
        return BACKENDS[engine.name]
    return BACKENDS["postgres" if is_postgres(db) else "duckdb"]


@contextmanager
def writer(db: str | Path) -> Iterator[Any]:
    """A read-write connection to the history with the engine's own driver (autocommit), for a change made
    behind scanwatch's back; its `execute` takes `?` on either engine."""
    if is_postgres(db):
        import psycopg

        with psycopg.connect(str(db), autocommit=True) as conn:
            yield _Marks(conn)
    else:
        import duckdb

        with duckdb.connect(str(db)) as conn:
            yield conn


class _Marks:
    """A psycopg connection whose `execute` takes `?` placeholders, as DuckDB's does."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        return self.conn.execute(sql.replace("?", "%s") if params else sql, params or None)


_HOLD_DUCKDB = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("BEGIN")
con.execute(sys.argv[3])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.execute("COMMIT")
con.close()
"""


@contextmanager
def holding_writer(db: str | Path, sql: str, seconds: float = 3.0) -> Iterator[None]:
    """A writer holding the history inside the block, its transaction having run `sql` uncommitted, as a merge
    under way; it has committed when the block ends. On PostgreSQL a transaction of this process, committed
    as the block ends. DuckDB's lock is a process's: another process holds the file, and commits after
    `seconds` (whatever waits for it inside the block is let go then); the block's end waits for it."""
    if is_postgres(db):
        import psycopg

        with psycopg.connect(str(db)) as conn:
            conn.execute(sql)
            yield
            conn.commit()
        return
    import subprocess
    import sys

    held = subprocess.Popen([sys.executable, "-c", _HOLD_DUCKDB, str(db), str(seconds), sql], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == "held"
        yield
        assert held.wait(30 + seconds) == 0
    finally:
        held.kill()
        held.wait()


def write(db: str | Path, sql: str, params: Sequence[Any] | None = None) -> None:
    """`sql` (`?` for each parameter) on the history, committed, with the engine's own driver."""
    with writer(db) as conn:
        conn.execute(sql, params or [])


def executemany(con: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """`sql` (`?` for each parameter) once per row on scanwatch's open connection `con`, through the engine's
    own driver (`driver_cursor`)."""
    with driver_cursor(con) as cursor:
        cursor.executemany(sql.replace("?", backend_of(con).mark), rows)


def primary_keys(db: str | Path, tables: Sequence[str]) -> list[str]:
    """The tables among `tables` that have a primary key, sorted, read from each engine's own catalogue."""
    if is_postgres(db):
        sql = ("SELECT table_name FROM information_schema.table_constraints WHERE constraint_type = 'PRIMARY KEY' "
               "AND table_schema = current_schema()")
    else:
        sql = "SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'"
    return sorted({name for (name,) in rows(db, sql) if name in tables})


def temp_views(db: str | Path) -> int:
    """The temporary views any session of the history holds now, as the engine lists them."""
    if is_postgres(db):
        return int(value(db, "SELECT count(*) FROM pg_views WHERE schemaname LIKE 'pg_temp%'"))
    return int(value(db, "SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT internal"))


@contextmanager
def reader(db: str | Path) -> Iterator[Any]:
    """A DB-API connection to the history (read-only on DuckDB), in UTC."""
    if is_postgres(db):
        import psycopg

        with psycopg.connect(str(db), autocommit=True) as conn:
            for name in ("json", "jsonb"):  # JSON as text, as DuckDB gives it
                conn.adapters.register_loader(name, psycopg.types.string.TextLoader)
            conn.execute("SET TimeZone = 'UTC'")
            yield conn
    else:
        import duckdb

        with duckdb.connect(str(db), read_only=True) as conn:
            conn.execute("SET TimeZone = 'UTC'")
            yield conn


@contextmanager
def driver_cursor(con: Any) -> Iterator[Any]:
    """The engine's own driver on an open history, for its `executemany` (`?` on DuckDB, `%s` on psycopg): a
    psycopg cursor, or the DuckDB connection itself (a new DuckDB cursor starts outside the history file)."""
    if con.engine.name == "postgres":
        with con.raw.cursor() as cursor:
            yield cursor
    else:
        yield con.raw


def rows(db: str | Path, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
    """`sql` on the history, `?` for each parameter on either engine."""
    with reader(db) as conn:
        if is_postgres(db):
            return conn.execute(sql.replace("?", "%s"), params or None).fetchall()
        return conn.execute(sql, params or []).fetchall()


def value(db: str | Path, sql: str, params: Sequence[Any] | None = None) -> Any:
    return rows(db, sql, params)[0][0]


def columns(db: str | Path, table: str) -> list[str]:
    found = rows(db, "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                     "AND table_schema = current_schema() ORDER BY ordinal_position", [table])
    return [c for (c,) in found]


def _normal(cell: Any) -> Any:
    """One cell as both engines' drivers can agree on it: timestamps in UTC, floats as floats."""
    if hasattr(cell, "astimezone") and getattr(cell, "tzinfo", None) is not None:
        from datetime import UTC

        return cell.astimezone(UTC)
    return cell


def dump(db: str | Path, tables: dict[str, str] = TABLES) -> dict[str, list[tuple]]:
    """Every row of the history's tables, observation times left out, in a stable order; a column's presence
    is kept as a flag where it records a decision (`removed_at`, `hidden_at`)."""
    out: dict[str, list[tuple]] = {}
    with reader(db) as conn:
        for table, order in tables.items():
            cols = [c for (c,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = "
                + ("%s" if is_postgres(db) else "?") + " AND table_schema = current_schema() "
                "ORDER BY ordinal_position", [table]).fetchall()]
            keep = [f'"{c}"' for c in cols if c not in OBSERVED]
            keep += [f'"{c}" IS NOT NULL AS "{c}_set"' for c in ("removed_at", "hidden_at") if c in cols]
            got = conn.execute(f"SELECT {', '.join(keep)} FROM {table} ORDER BY {order}").fetchall()
            # Sorted here too: each engine breaks ties of the ORDER BY its own way.
            out[table] = sorted((tuple(_normal(cell) for cell in row) for row in got), key=_sort_key)
    return out


def _sort_key(row: tuple) -> tuple:
    return tuple((cell is None, str(cell)) for cell in row)


def differences(got: dict[str, list[tuple]], want: dict[str, list[tuple]]) -> dict[str, str]:
    """Per table, how two dumps differ (empty when equal)."""
    out = {}
    for table in want:
        g, w = got.get(table, []), want[table]
        if g != w:
            only_got = [r for r in g if r not in w][:2]
            only_want = [r for r in w if r not in g][:2]
            out[table] = f"{len(g)} rows vs {len(w)}; only here: {only_got}; missing: {only_want}"
    return out


def point_at(mp: Any, sim: Any, db: str | Path) -> None:
    """The environment `scanwatch sync` reads, set with the monkeypatch `mp`: the simulator `sim`'s workspace,
    into the history `db`, with no snapshot folder or Dagster home of the machine's."""
    mp.setenv("SCANWATCH_BASE_URL", sim.base_url)
    mp.setenv("SCANWATCH_API_KEY", sim.api_key)
    mp.setenv("SCANWATCH_DB", str(db))
    mp.delenv("SCANWATCH_SNAPSHOT", raising=False)
    mp.delenv("DAGSTER_HOME", raising=False)


def sync_history(*, full_reconcile: bool = False, workspace: str = "default") -> Any:
    """One run of the ingestion assets and the history checks, as `scanwatch sync` runs them, from the
    environment (`SCANWATCH_DB` and the service's variables): everything but the metrics snapshot, which the
    tests of the snapshot run themselves. Returns Dagster's result."""
    import dagster as dg

    from pipelines.defs.assets import ALL_ASSETS
    from pipelines.defs.checks import history_checks
    from pipelines.defs.partitions import register
    from pipelines.defs.resources import default_resources

    instance = dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else dg.DagsterInstance.ephemeral()
    register(instance, [workspace])
    with contextlib.ExitStack() as stack:
        if not os.environ.get("DAGSTER_HOME"):
            stack.callback(instance.dispose)
        return dg.materialize(
            [*ALL_ASSETS, *history_checks], resources=default_resources(), instance=instance,
            selection=dg.AssetSelection.all() - dg.AssetSelection.assets("metrics_snapshot"),
            run_config={"ops": {"issues": {"config": {"full_reconcile": full_reconcile}},
                                "scans": {"config": {"all_projects": full_reconcile}}},
                        "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
            raise_on_error=False, partition_key=workspace)


def failure(result: Any) -> str:
    """The first failed step and its error, for an assert's message."""
    for event in result.get_step_failure_events():
        return f"{event.step_key}: {event.step_failure_data.error.message.strip()[:2000]}"
    return ""
