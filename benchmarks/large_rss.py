"""One large workspace: the peak RSS of `scanwatch sync`'s first sync of ~200,000 issues, on each engine.

`python -m benchmarks.large_rss [--engine duckdb|postgres|both] [--scale 200k] [--repeats 1]`. The simulator's
`200k` world (seed 7, ~200k visible issues on 20 projects) runs in its own process with the rate limit out of
the way; `scanwatch sync --quiet` runs as users run it, in a child process, into a fresh history (a DuckDB
file, or a database of a scratch PostgreSQL server, tests/pg_server.py), then once more unchanged. The peak
is each process's own `VmHWM`, read from /proc every 20 ms for the command and for every process it forks
(the figure is the largest of them; the command runs one workspace in its own process). Wall and CPU seconds
(the command's and its children's) come with it. Timings are reported, never asserted.

Prints a table and writes `benchmarks/results/large_rss.json`.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RAISED = 1_000_000


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            return dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)
    except (OSError, ValueError):
        return {}


def _descendants(root: int) -> list[int]:
    """Every live process under `root` (its children, theirs, ...), from /proc's parent ids."""
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            ppid = _status(int(entry.name)).get("PPid", "").strip()
            if ppid.isdigit():
                parents.setdefault(int(ppid), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def _kib(status: dict[str, str], field: str) -> int:
    value = status.get(field, "0 kB").split()
    return int(value[0]) if value and value[0].isdigit() else 0


def run_tree(cmd: list[str], env: dict[str, str], timeout: float = 7200) -> dict:
    """Run `cmd`; its exit code, wall and CPU seconds, its own peak RSS and its children's largest (MiB)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "SCANWATCH_SNAPSHOT")}
    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(cmd, env={**full_env, **env}, stdout=out, stderr=subprocess.STDOUT, text=True)
        peaks: dict[int, int] = {}
        sampled = 0
        while True:
            sampled += 1
            # Children are looked for every tenth sample (a walk of /proc costs more than a read of one file).
            pids = [proc.pid, *(_descendants(proc.pid) if sampled % 10 == 1 else [p for p in peaks if p != proc.pid])]
            for pid in pids:
                peaks[pid] = max(peaks.get(pid, 0), _kib(_status(pid), "VmHWM"))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - started > timeout:
                proc.kill()
            time.sleep(0.02)
        seconds = time.perf_counter() - started
        out.seek(0)
        text = out.read()
    own = peaks.pop(proc.pid, 0) or usage.ru_maxrss
    return {"code": os.waitstatus_to_exitcode(status), "seconds": round(seconds, 1),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1), "peak_rss_mib": round(own / 1024, 1),
            "children": len(peaks), "children_peak_rss_mib": round(max(peaks.values(), default=0) / 1024, 1),
            "output": text[-2000:]}


def _sync(sim, db: str) -> dict:
    before = sim.request_count()
    row = run_tree([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], sim.env(db))
    row["requests"] = sim.request_count() - before
    if row["code"] != 0:
        raise RuntimeError(f"scanwatch sync into {db.split('@')[-1]} failed: {row['output']}")
    row["summary"] = (row.pop("output").strip().splitlines() or [""])[-1][:300]
    return row


def measure(scale: str, engines: list[str], repeats: int) -> dict:
    from benchmarks.sim import SimProcess

    work = Path(tempfile.mkdtemp(prefix="bench-large-rss-"))
    server = None
    runs: dict[str, list[dict]] = {engine: [] for engine in engines}
    try:
        if "postgres" in engines:
            from tests.pg_server import PgServer

            server = PgServer.start()
        with SimProcess(scale=scale, rate_limit=RAISED) as sim:
            for n in range(repeats):
                for engine in engines if n % 2 == 0 else engines[::-1]:
                    db = (str(work / f"history-{n}.duckdb") if engine == "duckdb"
                          else server.url(server.create_database()))
                    first = _sync(sim, db)
                    resync = _sync(sim, db)
                    runs[engine].append({"first": first, "resync": resync})
                    print(f"[bench] {engine} run {n + 1}: first {first['seconds']} s {first['peak_rss_mib']} MiB, "
                          f"re-sync {resync['seconds']} s {resync['peak_rss_mib']} MiB", file=sys.stderr, flush=True)
            issues = sim.stats()
    finally:
        if server is not None:
            server.stop()

    def med(engine: str, phase: str, key: str) -> float:
        return round(statistics.median(r[phase][key] for r in runs[engine]), 1)

    keys = ("seconds", "cpu_seconds", "peak_rss_mib", "children_peak_rss_mib", "requests")
    return {"scale": scale, "repeats": repeats, "world": issues,
            "summary": {engine: {phase: {k: med(engine, phase, k) for k in keys} for phase in ("first", "resync")}
                        for engine in engines},
            "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("duckdb", "postgres", "both"), default="both")
    parser.add_argument("--scale", default="200k")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    engines = ["duckdb", "postgres"] if args.engine == "both" else [args.engine]
    result = measure(args.scale, engines, args.repeats)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "large_rss.json").write_text(json.dumps(result, indent=2))
    print(f"scale {args.scale} (seed 7), median of {args.repeats}; `scanwatch sync` as a child process")
    print("engine | sync | peak RSS | children's peak RSS | wall | CPU | requests")
    for engine, phases in result["summary"].items():
        for phase, s in phases.items():
            print(f"{engine} | {phase} | {s['peak_rss_mib']} MiB | {s['children_peak_rss_mib']} MiB | "
                  f"{s['seconds']} s | {s['cpu_seconds']} s | {s['requests']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
