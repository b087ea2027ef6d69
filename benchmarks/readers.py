"""`python -m benchmarks.readers [--scale large] [--repeats 5]`: what a reader waits for on each engine.

One world (seed 7, rate limit out of the way) synced into a fresh DuckDB file and a fresh PostgreSQL 15
database (a scratch cluster, tests/pg_server.py, on the same cores): the ingestion assets and the history
checks, each sync in its own process. Then, on each history:

- the reconstruction of the days before the first sync, in its own process (`benchmarks.backfill`'s child:
  the reconstructed tables emptied, then a first run and a re-run that changes nothing);
- every cookbook query through the read-only door, as `scanwatch sql NAME` runs it (connection included):
  one warm-up, then the median of `--repeats` runs;
- on PostgreSQL, every panel of the history dashboard as Grafana would send it (all workspaces, last 30 days).

Prints a table and writes `benchmarks/results/readers-<scale>.json`. Timings are reported, never asserted.
The scratch server's one role is its superuser: the door reads as it with `as_writer`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def _sync(env: dict[str, str]) -> float:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "benchmarks.engines", "--child"], env=env, capture_output=True,
                          text=True, timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"sync failed: {(done.stdout + done.stderr)[-2000:]}")
    return round(time.monotonic() - started, 1)


def _timed(run, repeats: int) -> tuple[float, int]:
    """Median seconds of `repeats` runs after one warm-up, and the rows the query returned."""
    rows = len(run())
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3), rows


def _cookbook(db: str, repeats: int) -> dict[str, dict]:
    from pipelines.core import sqlfiles
    from pipelines.storage.read_only import execute_read_only

    out = {}
    for name, query in sqlfiles.cookbook().items():
        seconds, rows = _timed(lambda q=query: execute_read_only(db, q.sql, timeout=None, as_writer=True)[1], repeats)
        out[name] = {"seconds": seconds, "rows": rows}
    return out


def _panels(url: str, repeats: int) -> dict[str, dict]:
    import psycopg

    from tests.grafana.queries import expand_sql, sql_queries

    queries = sql_queries()
    (variable,) = [q for q in queries if q.kind == "variable"]
    end = datetime.now(UTC)
    out = {}
    with psycopg.connect(url, autocommit=True) as conn:
        workspaces = [w for (w,) in conn.execute(variable.expr).fetchall()]
        for q in queries:
            if q.kind != "panel" or q.title in out:
                continue
            sql = expand_sql(q.expr, workspaces=workspaces, start=end - timedelta(days=30), end=end)
            seconds, rows = _timed(lambda s=sql: conn.execute(s).fetchall(), repeats)
            out[q.title] = {"seconds": seconds, "rows": rows}
    return out


def measure(scale: str, repeats: int) -> dict:
    from benchmarks.backfill import _measure
    from simulator.testing import SimConfig, serve_simulator
    from tests.pg_server import PgServer

    work = Path(tempfile.mkdtemp(prefix="bench-readers-"))
    server = PgServer.start()
    result: dict = {"scale": scale, "repeats": repeats, "engines": {}}
    try:
        histories = {"duckdb": str(work / "history.duckdb"), "postgres": server.url(server.create_database())}
        with serve_simulator(SimConfig(seed=7, scale=scale, clock="driven", rate_limit=1_000_000)) as sim:
            for engine, db in histories.items():
                env = dict(os.environ, SCANWATCH_BASE_URL=sim.base_url, SCANWATCH_API_KEY=sim.api_key,
                           SCANWATCH_DB=db)
                env.pop("SCANWATCH_WORKSPACES_FILE", None)
                env.pop("DAGSTER_HOME", None)
                synced = _sync(env)
                print(f"[bench] {engine}: synced in {synced} s", file=sys.stderr, flush=True)
                result["engines"][engine] = {"sync_seconds": synced}
        for engine, db in histories.items():
            figures = result["engines"][engine]
            figures["reconstruct"] = _measure("reconstruct", db)
            figures["cookbook"] = _cookbook(db, repeats)
            if engine == "postgres":
                figures["panels"] = _panels(db, repeats)
            print(f"[bench] {engine}: reconstruction {figures['reconstruct']['seconds']} s", file=sys.stderr,
                  flush=True)
        import duckdb

        with duckdb.connect(histories["duckdb"], read_only=True) as conn:
            result["issues"] = conn.execute("SELECT count(*) FROM issues").fetchall()[0][0]
    finally:
        server.stop()
    result["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="large")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    result = measure(args.scale, args.repeats)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"readers-{args.scale}.json").write_text(json.dumps(result, indent=2) + "\n")
    d, p = result["engines"]["duckdb"], result["engines"]["postgres"]
    print(f"{result['issues']:,} issues ({args.scale}); medians of {args.repeats} after a warm-up")
    print("cookbook query | DuckDB | PostgreSQL | PostgreSQL / DuckDB | rows")
    for name in sorted(d["cookbook"]):
        a, b = d["cookbook"][name], p["cookbook"][name]
        ratio = b["seconds"] / a["seconds"] if a["seconds"] else float("nan")
        print(f"{name} | {a['seconds']} s | {b['seconds']} s | {ratio:.2f}x | {a['rows']} / {b['rows']}")
    for engine, f in (("DuckDB", d), ("PostgreSQL", p)):
        r = f["reconstruct"]
        print(f"reconstruction in {engine}: {r['seconds']} s (re-run {r['rerun_seconds']} s, {r['rerun_changed']} "
              f"changed), peak RSS {r['peak_mb']} MB, {r['score_rows']} score rows, {r['open_issue_rows']} "
              "open-issue rows")
    for title, f in p["panels"].items():
        print(f"history dashboard on PostgreSQL, {title}: {f['seconds']} s, {f['rows']} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
