"""Shared machinery of the reliability suites: run a sync (in-process or as the real CLI), dump the
history in a comparable form, and tell a clean one-line failure from a traceback.

Comparisons are of whole tables, row by row, minus scanwatch's own observation timestamps (when a sync
happened to see a row), which two runs of the same world can never share.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[2]

# Columns that record when scanwatch looked, not what the service said.
OBSERVED = ("first_observed_at", "last_observed_at", "observed_at", "removed_at", "workspace_id")

CORE_TABLES: dict[str, str] = {
    "projects": "id",
    "targets": "id",
    "scans": "id",
    "issues": "id",
    "issue_events": "issue_id, event, from_value, to_value",
}

Dump = dict[str, list[tuple]]


def _columns(conn: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    rows = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                        "ORDER BY ordinal_position", [table]).fetchall()
    return [r[0] for r in rows]


def dump_conn(conn: duckdb.DuckDBPyConnection, tables: dict[str, str] = CORE_TABLES) -> Dump:
    out: Dump = {}
    for table, order in tables.items():
        cols = _columns(conn, table)
        keep = [f'"{c}"' for c in cols if c not in OBSERVED]
        if "removed_at" in cols:
            keep.append("removed_at IS NOT NULL AS removed")
        out[table] = conn.execute(f"SELECT {', '.join(keep)} FROM {table} ORDER BY {order}").fetchall()
    return out


def dump(db: Path, tables: dict[str, str] = CORE_TABLES) -> Dump:
    """Every row of the core tables, observation timestamps left out, in a stable order."""
    if not Path(db).exists():
        return {t: [] for t in tables}
    with duckdb.connect(str(db), read_only=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return dump_conn(conn, tables)


def diff(got: Dump, want: Dump) -> dict[str, str]:
    """Per table, a short description of how two dumps differ (empty when identical)."""
    out = {}
    for table in want:
        g, w = set(got.get(table, [])), set(want[table])
        if got.get(table) != want[table]:
            out[table] = (f"{len(got.get(table, []))} rows vs {len(want[table])}; only here: {sorted(g - w)[:2]}; "
                          f"missing: {sorted(w - g)[:2]}")
    return out


def service_env(sim, db: Path, **extra: str) -> dict[str, str]:
    """The environment `scanwatch sync` and `scanwatch exporter` share, for a subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env.update({"SCANWATCH_BASE_URL": sim.base_url, "SCANWATCH_API_KEY": sim.api_key, "SCANWATCH_DB": str(db),
                "PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


def cli(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `scanwatch ARGS` as users do, from the repository root."""
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


def assert_one_line(stderr: str, *, must_contain: str = "") -> str:
    """A failure the user can read: no traceback or stack trace (Python's or Dagster's), no framework log
    dump, and the reason on one `scanwatch ...:` line."""
    for noise in ("Traceback", "Stack Trace", " - dagster - ", "DagsterExecutionStepExecutionError"):
        assert noise not in stderr, stderr[-3000:]
    lines = [ln for ln in stderr.splitlines() if ln.startswith("scanwatch ")]
    assert len(lines) == 1, stderr[-2000:]
    assert must_contain in lines[0], lines[0]
    return lines[0]


@contextmanager
def sync_env(sim, db: Path, **extra: str) -> Iterator[None]:
    """os.environ pointed at one simulator and one history for an in-process sync, restored afterwards."""
    saved = dict(os.environ)
    os.environ.update(service_env(sim, db, **extra))
    for k in ("SCANWATCH_SNAPSHOT", "DAGSTER_HOME"):
        if k not in extra:
            os.environ.pop(k, None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def sync_in_process(sim, db: Path, **kw):
    """One `materialize_all()` (the code `scanwatch sync` runs) against `sim` into `db`."""
    from pipelines.materialize import materialize_all

    with sync_env(sim, db):
        return materialize_all(**kw)


def query_rows(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return conn.execute(sql, params or []).fetchall()
