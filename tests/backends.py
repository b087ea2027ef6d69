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
