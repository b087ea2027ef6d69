"""Readers while syncs write, on one PostgreSQL history: `scanwatch sql` latency with and without 4 writers.

`python -m benchmarks.pg_readers [--scale medium] [--writers 4] [--query NAME]`. One simulator process serves
2 x W Pro workspaces of the same world (seed 7), the rate limit out of the way so that the writers write as
fast as they can. On a scratch PostgreSQL 15 server (tests/pg_server.py), W workspaces are first synced; then:

1. at rest: the read, again and again for `--seconds`, nobody writing;
2. under writes: the same read, again and again, while W sync processes (one workspace each, as pods on
   different nodes: what `scanwatch sync` runs less the metrics snapshot) take the first sync of the other W
   workspaces, from their start to the last one's end;
3. at rest again, the history now twice the size: the read's own growth, told apart from the writers'.

Each read goes through the read-only door of `scanwatch sql` (`pipelines.storage.read_only.execute_read_only`, the
function the command calls: a new connection, a READ ONLY transaction with statement and lock timeouts,
rolled back), timed from the call to the last row; every tenth is the command itself in a child process
(`scanwatch sql --db URL --format csv`, Python's start included). The read is a cookbook query (by default
`open_issues_by_project` where it runs on PostgreSQL, else its counts without the pivot, the same size).
The scratch server has one role, its superuser: the reads pass `--as-writer` (the door's path is the same,
its role check aside). Lock waits of the database are sampled as in benchmarks/pg_writers.py.

Prints p50, p99 and max per phase and writes `benchmarks/results/pg_readers.json`. Never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.pg_writers import LockWaits, _load, run_syncs, start_sync, sync_env
from benchmarks.sim import SimProcess

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RAISED = 1_000_000
CLI_EVERY = 10
# open_issues_by_project without DuckDB's PIVOT: one row per project and severity instead of a column each.
COUNTS = """
SELECT l.workspace, l.project, p.score, p.grade, o.severity, count(o.id) AS issues
FROM project_labels AS l
JOIN projects AS p ON p.id = l.project_id
LEFT JOIN open_issues_now AS o ON o.project_id = l.project_id
WHERE l.listed
GROUP BY l.workspace, l.project, p.score, p.grade, o.severity
ORDER BY issues DESC, l.workspace, l.project
"""


def read_sql(db: str, name: str) -> tuple[str, str]:
    """The cookbook query `name` if it runs on this history, else the same counts in SQL PostgreSQL runs."""
    from pipelines.core import sqlfiles
    from pipelines.storage.read_only import ReadRefused, execute_read_only

    sql = sqlfiles.cookbook()[name].sql
    try:
        execute_read_only(db, sql, as_writer=True)
        return name, sql
    except ReadRefused:
        return f"{name} (its counts, without the pivot)", COUNTS


def percentiles(seconds: list[float]) -> dict:
    if not seconds:
        return {"reads": 0}
    ms = sorted(s * 1000 for s in seconds)
    return {"reads": len(ms), "p50_ms": round(statistics.median(ms), 1),
            "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 1), "max_ms": round(ms[-1], 1)}


def read_loop(db: str, sql: str, until) -> dict:
    """Reads back to back until `until()` says stop: the door's latencies, the command's every tenth."""
    from pipelines.storage.read_only import execute_read_only

    door, cli, failures = [], [], []
    n = 0
    while not until():
        n += 1
        started = time.perf_counter()
        if n % CLI_EVERY == 0:
            done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sql", "--db", db, "--format", "csv",
                                   "--as-writer", sql],
                                  cwd=ROOT, capture_output=True, text=True, timeout=300)
            cli.append(time.perf_counter() - started)
            if done.returncode != 0:
                failures.append(done.stderr.strip()[-300:])
        else:
            try:
                execute_read_only(db, sql, as_writer=True)
            except Exception as exc:  # a refused read is a figure too: counted, then the loop goes on
                failures.append(str(exc)[:300])
            door.append(time.perf_counter() - started)
    return {"door": percentiles(door), "command": percentiles(cli), "failures": len(failures),
            "first_failure": failures[0] if failures else None}


def _finished(procs: list[subprocess.Popen[str]]):
    return lambda: all(p.poll() is not None for p in procs)


def _timed(seconds: float):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end


def measure(scale: str, writers: int, seconds: float, query: str) -> dict:
    from tests.pg_server import PgServer

    server = PgServer.start(Path(tempfile.mkdtemp(prefix="bench-pg-readers-")))
    phases: dict[str, dict] = {}
    try:
        with SimProcess(scale=scale, seed=7, rate_limit=RAISED, workspaces=2 * writers) as sim:
            name = server.create_database()
            db = server.url(name)
            run_syncs(sim.base_url, sim.keys[:writers], db, whole=False)
            label, sql = read_sql(db, query)
            for phase in ("at rest", "under writes", "at rest after"):
                load_before = _load()
                with LockWaits(db) as waits:
                    if phase == "under writes":
                        folder = Path(tempfile.mkdtemp(prefix="bench-pg-readers-"))
                        procs = [start_sync(sync_env(sim.base_url, key, db, f"w{n}", folder), f"w{n}", False)
                                 for n, key in enumerate(sim.keys[writers:])]
                        started = time.perf_counter()
                        row = read_loop(db, sql, _finished(procs))
                        row["writers_seconds"] = round(time.perf_counter() - started, 1)
                        failed = [p.communicate()[1][-500:] for p in procs if p.returncode != 0]
                        if failed:
                            raise RuntimeError(f"a writer failed: {failed[0]}")
                    else:
                        row = read_loop(db, sql, _timed(seconds))
                row.update(lock_waits=waits.summary(), load_before=load_before, load_after=_load(),
                           issues=int(server.psql("SELECT count(*) FROM issues", name)))
                phases[phase] = row
                print(f"[bench] {phase}: {row['door']}, command {row['command']}, load {load_before} -> "
                      f"{row['load_after']}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    return {"benchmark": "pg_readers", "scale": scale, "writers": writers, "query": label, "phases": phases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long each phase at rest reads")
    parser.add_argument("--query", default="open_issues_by_project", help="a cookbook query's name")
    args = parser.parse_args(argv)
    result = measure(args.scale, args.writers, args.seconds, args.query)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pg_readers.json").write_text(json.dumps(result, indent=2))
    print(f"read: {result['query']}; {args.writers} writers, {args.scale} worlds")
    print("phase | issues | reads | door p50 / p99 / max | `scanwatch sql` p50 / max (reads) | failures | "
          "lock-wait samples | load before -> after")
    for phase, r in result["phases"].items():
        d, c = r["door"], r["command"]
        print(f"{phase} | {r['issues']:,} | {d['reads']} | {d.get('p50_ms')} / {d.get('p99_ms')} / {d.get('max_ms')} "
              f"ms | {c.get('p50_ms')} / {c.get('max_ms')} ms ({c['reads']}) | {r['failures']} | "
              f"{r['lock_waits']['samples']} {r['lock_waits']['by_lock_type'] or ''} | "
              f"{r['load_before']} -> {r['load_after']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
