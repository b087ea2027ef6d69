"""`python -m benchmarks.sql_wait [--seconds 150] [--wait 30]`: what `scanwatch sql` meets on a DuckDB history
while syncs write it, as during `make demo`.

The demo's world (the simulator's small scale, two Pro workspaces in a workspaces file, the contract's rate
limit) is synced once, then `scanwatch sync` runs in a loop (a round of scans before each) while this process
runs the cookbook's queries one after another through the read-only door, as `scanwatch sql NAME` does.
Twice: with `--wait 0` (refused at once, as before the wait) and with the given wait. A probe opens the file
read-only every 50 ms throughout, so the figures also say how long the syncs held the file.

Per mode it prints: queries run, refused (exit 75), served; how long a served query took beyond its time at
rest (its wait for the writer: median, p90, max); and the probe's view of the writers (share of the time the
file was held, the longest hold). Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PAUSE = 2.0  # seconds between two queries: a person reading one answer and pasting the next query
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def _sync_loop(sim, env: dict[str, str], stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        sim.run_round()
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"sync failed: {done.stderr[-1000:]}")
        out.append(time.monotonic() - started)


PROBE = """
import sys, time, duckdb
held_since = None
while True:
    time.sleep(0.05)
    try:
        duckdb.connect(sys.argv[1], read_only=True).close()
        if held_since is not None:
            print(time.monotonic() - held_since, flush=True)
            held_since = None
    except duckdb.Error as exc:
        if "lock" in str(exc).lower():
            held_since = held_since or time.monotonic()
        else:
            print(type(exc).__name__, str(exc)[:200], file=sys.stderr, flush=True)
"""


def _probe(db: Path, stop: threading.Event, holds: list[float]) -> None:
    """Opens the file read-only every 50 ms, in a process of its own (DuckDB shares a file within a process):
    the lengths of the spans during which it could not."""
    probe = subprocess.Popen([sys.executable, "-c", PROBE, str(db)], stdout=subprocess.PIPE, text=True)
    reader = threading.Thread(target=lambda: holds.extend(float(line) for line in probe.stdout), daemon=True)
    reader.start()
    stop.wait()
    probe.kill()
    probe.wait()
    reader.join(5)


def _at_rest(db: Path) -> dict[str, float]:
    from pipelines.core import sqlfiles
    from pipelines.storage.read_only import execute_read_only

    out = {}
    for name, query in sqlfiles.cookbook().items():
        times = []
        for _ in range(3):
            started = time.perf_counter()
            execute_read_only(db, query.sql, wait=0)
            times.append(time.perf_counter() - started)
        out[name] = statistics.median(times)
    return out


def _readers(db: Path, wait: float, seconds: float, rest: dict[str, float]) -> dict:
    from pipelines.core import sqlfiles
    from pipelines.storage.read_only import EXIT_BUSY, ReadRefused, execute_read_only

    queries = list(sqlfiles.cookbook().items())
    waited, refused, served = [], 0, 0
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        name, query = queries[n % len(queries)]
        n += 1
        started = time.perf_counter()
        try:
            execute_read_only(db, query.sql, wait=wait)
            served += 1
            waited.append(max(0.0, time.perf_counter() - started - rest[name]))
        except ReadRefused as exc:
            if exc.code != EXIT_BUSY:
                raise
            refused += 1
        time.sleep(PAUSE)
    waited.sort()
    return {"queries": n, "refused": refused, "served": served,
            "wait_median_s": round(statistics.median(waited), 3) if waited else None,
            "wait_p90_s": round(waited[int(0.9 * (len(waited) - 1))], 3) if waited else None,
            "wait_max_s": round(waited[-1], 3) if waited else None}


def measure(seconds: float, wait: float) -> dict:
    from simulator.testing import SimConfig, serve_simulator

    work = Path(tempfile.mkdtemp(prefix="bench-sql-wait-"))
    db = work / "history.duckdb"
    result: dict = {"seconds": seconds, "modes": {}}
    with serve_simulator(SimConfig(seed=7, scale="small", clock="driven", control=True, pro_workspaces=2)) as sim:
        listed = work / "workspaces.yml"
        listed.write_text("workspaces:\n  - name: acme\n    api_key_env: BENCH_KEY_ACME\n"
                          "  - name: globex\n    api_key_env: BENCH_KEY_GLOBEX\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
        env.update(SCANWATCH_BASE_URL=sim.base_url, SCANWATCH_DB=str(db), SCANWATCH_WORKSPACES_FILE=str(listed),
                   BENCH_KEY_ACME=sim.keys["pro"], BENCH_KEY_GLOBEX=sim.keys["pro_2"],
                   DAGSTER_HOME=str(work / "dagster"))
        (work / "dagster").mkdir()
        subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], env=env, cwd=ROOT, check=True,
                       capture_output=True, timeout=600)
        rest = _at_rest(db)
        result["at_rest_s"] = {k: round(v, 3) for k, v in rest.items()}
        for label, mode_wait in (("no wait (before)", 0.0), (f"--wait {wait:g}", wait)):
            stop, syncs, holds = threading.Event(), [], []
            threads = [threading.Thread(target=_sync_loop, args=(sim, env, stop, syncs), daemon=True),
                       threading.Thread(target=_probe, args=(db, stop, holds), daemon=True)]
            for t in threads:
                t.start()
            started = time.monotonic()
            figures = _readers(db, mode_wait, seconds, rest)
            stop.set()
            for t in threads:
                t.join(600)
            span = time.monotonic() - started
            figures.update(syncs=len(syncs), sync_median_s=round(statistics.median(syncs), 1) if syncs else None,
                           file_held_share=round(sum(holds) / span, 3), longest_hold_s=round(max(holds, default=0), 2),
                           holds=len(holds))
            result["modes"][label] = figures
            print(f"[bench] {label}: {figures}", file=sys.stderr, flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=150)
    parser.add_argument("--wait", type=float, default=30)
    parser.add_argument("--label", default="", help="a suffix for the results file (e.g. before, after)")
    args = parser.parse_args(argv)
    result = measure(args.seconds, args.wait)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"sql-wait{'-' + args.label if args.label else ''}.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    print("mode | queries | refused (75) | served | waited median / p90 / max | file held | longest hold | syncs")
    for label, f in result["modes"].items():
        print(f"{label} | {f['queries']} | {f['refused']} | {f['served']} | {f['wait_median_s']} / {f['wait_p90_s']}"
              f" / {f['wait_max_s']} s | {f['file_held_share']:.0%} | {f['longest_hold_s']} s | {f['syncs']}"
              f" (median {f['sync_median_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
