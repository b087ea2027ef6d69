"""`python -m benchmarks.many_workspaces [--counts 10,100] [--engine duckdb|postgres|both] [--profile]`:
a first sync and an unchanged re-sync of N small simulator workspaces in one `scanwatch sync`.

The users who need scanwatch most follow many workspaces, so what a workspace costs when nothing moved is
the figure that decides how many one machine can follow: the simulator's small world (3 projects) in each of
N Pro workspaces, one workspaces file listing them all, `scanwatch sync` in a child process (start-up, Dagster
and all) on a fresh history, then again with nothing changed. For each sync: wall, CPU (the child and what
it waited for), CPU per workspace, peak RSS (the child's own high-water mark, and its children's), and
requests per workspace as the service counted them (two for an unchanged workspace is the contract's
minimum), and on PostgreSQL the server's own CPU apart. The rate limit is raised out of the way: what is
measured is scanwatch, not the pacing.

`--tree DIR` runs the syncs from another source tree (`git archive <commit> | tar -x -C DIR`: its own code,
this checkout's interpreter), to measure before and after a change on the same machine.
`--profile` writes a cProfile of the unchanged re-sync of the largest count to
`benchmarks/results/many_workspaces.prof` (`python -m pstats` reads it). Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.dagster_refresh import Sampled
from benchmarks.sim import SimProcess
from benchmarks.workspaces import workspaces_environment

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RAISED = 1_000_000


def _tree_hwm_kb(pid: int) -> int:
    """The peak resident set of the process and of every live descendant (a forked run process), the largest."""
    peak = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as fh:
                todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return peak


def measured(cmd: list[str], env: dict[str, str], timeout: float, cwd: Path = ROOT) -> dict:
    """Run a command; its exit code, wall seconds, CPU seconds (its own and every descendant's), the peak
    RSS of its largest process in MiB, and its output's tail."""
    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, cwd=cwd)
        peak_kb = 0
        sampled = Sampled(proc.pid)  # a fork server's run processes are never reaped into the command's count
        while True:
            peak_kb = max(peak_kb, _tree_hwm_kb(proc.pid))
            sampled.sample()
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > started + timeout:
                proc.kill()
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        out.seek(0)
        text = out.read()
    return {"code": os.waitstatus_to_exitcode(status), "seconds": seconds,
            "cpu": max(usage.ru_utime + usage.ru_stime, sampled.sample()),
            "rss_mib": (peak_kb or usage.ru_maxrss) / 1024.0,
            "out": text}


def _environment(sim: SimProcess, count: int, folder: Path, db: str) -> dict[str, str]:
    return {**workspaces_environment(sim, count, folder, db), "SCANWATCH_SNAPSHOT": str(folder / "snapshot")}


def server_cpu(server: object | None) -> float:
    """CPU seconds the PostgreSQL server has spent: its postmaster and every backend, live or ended (a
    backend's time is the postmaster's once it has reaped it); 0 without a server."""
    if server is None:
        return 0.0
    postmaster = int((server.data_dir / "postmaster.pid").read_text().split()[0])  # type: ignore[attr-defined]
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in [postmaster, *_children(postmaster)]:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / ticks


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(c) for c in fh.read().split()]
    except OSError:
        return []


def cli_sync(sim: SimProcess, count: int, env: dict[str, str], profile: Path | None = None, tree: Path = ROOT,
             server: object | None = None) -> dict:
    """One `scanwatch sync --quiet` of the environment's workspaces: wall, CPU (a workspace's too), the
    server's CPU, peak RSS and requests (a workspace's too)."""
    before = sim.request_count()
    server_before = server_cpu(server)
    prefix = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else [sys.executable]
    done = measured([*prefix, "-m", "pipelines.cli", "sync", "--quiet"], {**env, "PYTHONPATH": str(tree)},
                    timeout=7200, cwd=tree)
    failed = [line[:300] for line in done["out"].splitlines()
              if line.startswith("scanwatch sync:") and not line.startswith("scanwatch sync: ok")]
    if done["code"] != 0 and ("scanwatch sync: ok" not in done["out"] or not failed):
        raise RuntimeError(f"sync of {count} workspaces failed: {(failed or [done['out'][-1500:]])[:5]}")
    requests = sim.request_count() - before
    return {"wall_s": round(done["seconds"], 1), "cpu_s": round(done["cpu"], 1),
            "server_cpu_s": round(server_cpu(server) - server_before, 1),
            "cpu_per_workspace_s": round(done["cpu"] / count, 3), "peak_rss_mib": round(done["rss_mib"], 1),
            "requests": requests, "requests_per_workspace": round(requests / count, 2),
            "failed_workspaces": failed[:20]}


def measure(count: int, engine: str, profile: bool = False, tree: Path = ROOT) -> dict:
    from tests.pg_server import PgServer

    server = PgServer.start() if engine == "postgres" else None
    try:
        with SimProcess(scale="small", seed=7, rate_limit=RAISED, workspaces=count) as sim, \
                tempfile.TemporaryDirectory(prefix="scanwatch-bench-many-") as tmp:
            db = server.url(server.create_database()) if server else str(Path(tmp) / "history.duckdb")
            env = _environment(sim, count, Path(tmp), db)
            first = cli_sync(sim, count, env, tree=tree, server=server)
            print(f"[bench] {engine} {count}: first sync {first}", file=sys.stderr, flush=True)
            out = RESULTS / "many_workspaces.prof" if profile else None
            if out:
                RESULTS.mkdir(parents=True, exist_ok=True)
            again = cli_sync(sim, count, env, out, tree, server)
            print(f"[bench] {engine} {count}: unchanged re-sync {again}", file=sys.stderr, flush=True)
    finally:
        if server:
            server.stop()
    return {"engine": engine, "workspaces": count, "tree": str(tree), "first_sync": first, "unchanged_resync": again}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="10,100", help="numbers of workspaces, comma-separated")
    parser.add_argument("--engine", choices=("duckdb", "postgres", "both"), default="both")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest count's unchanged re-sync")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose scanwatch runs the syncs")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    engines = ("duckdb", "postgres") if args.engine == "both" else (args.engine,)
    rows = [measure(n, engine, args.profile and n == max(counts), args.tree.resolve())
            for engine in engines for n in counts]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "many_workspaces.json").write_text(json.dumps(rows, indent=2))
    print("engine | workspaces | sync | wall | CPU | CPU per workspace | CPU per added workspace | server CPU | "
          "peak RSS | requests per workspace")
    for row in rows:
        for name, key in (("first", "first_sync"), ("unchanged", "unchanged_resync")):
            r = row[key]
            print(f"{row['engine']} | {row['workspaces']} | {name} | {r['wall_s']} s | {r['cpu_s']} s | "
                  f"{r['cpu_per_workspace_s']} s | {_added(rows, row, key)} | {r['server_cpu_s']} s | "
                  f"{r['peak_rss_mib']} MiB | {r['requests_per_workspace']}")
    return 0


def _added(rows: list[dict], row: dict, key: str) -> str:
    """scanwatch's CPU per workspace beyond the next smaller count's, the same sync on the same engine: the
    command's start-up (importing Dagster, forking its run processes: a few CPU-seconds whatever the count)
    weighs on 10 workspaces' figure per workspace and not on the difference, which is what grows with them."""
    smaller = [r for r in rows if r["engine"] == row["engine"] and r["workspaces"] < row["workspaces"]]
    if not smaller:
        return "-"
    base = max(smaller, key=lambda r: r["workspaces"])
    return f"{(row[key]['cpu_s'] - base[key]['cpu_s']) / (row['workspaces'] - base['workspaces']):.3f} s"


if __name__ == "__main__":
    sys.exit(main())
