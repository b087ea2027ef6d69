"""Many writers on one PostgreSQL history: K workspaces synced by K `scanwatch sync` processes at once.

`python -m benchmarks.pg_writers [--counts 1,4,16] [--scale medium] [--limit 20 --window 10]`. One simulator
process serves K independent Pro workspaces of the same world (seed 7), each behind its own key with its own
rate limit: 20 requests per 10 s window by default, the service's 120 a minute compressed in time, so a
sync waits on the limit as it would in production and not on Dagster's start-up. For each K (1, 4, 16, then 1
again, back to back, so the host's load is bracketed), a fresh database on one scratch PostgreSQL 15 server
(tests/pg_server.py), then K sync processes started together, one key each: the processes stand in for run
pods on different nodes (no shared Python lock, no Dagster pool). Each runs what `scanwatch sync` runs less
the metrics snapshot (the ingestion assets and the history checks), or with `--whole-sync` the command itself,
snapshot included.

Per K: the wall from the start of the first to the end of the last, each process's own wall, the requests
the service counted (429s included) against the minimum the worlds need (benchmarks/oracle.py, walked once on
an unlimited copy of the same worlds), and the server's lock waits: every 0.1 s, the backends of the
database waiting on a heavyweight lock (`pg_stat_activity.wait_event_type = 'Lock'`), by lock type. A sample
is a backend seen waiting; samples x 0.1 s approximates the time spent waiting. And the CPU seconds of the
sync processes, of the simulator and of the server (its backends included): over the wall, the cores the
run kept busy, which tells a host's two cores running out from the syncs waiting on something; and, sampled
every 0.1 s from /proc/stat, the share of the wall during which every core of the host was busy (syncs that
start, page and merge in step need the cores at the same moments, which an average hides).

Prints a table and writes `benchmarks/results/pg_writers.json`. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.sampling import Sampler
from benchmarks.sim import SimProcess

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SAMPLE_SECONDS = 0.1
# Backends of this database waiting on a lock, by what they wait for: scanwatch's advisory locks are told
# apart by their key (pipelines/storage/destinations/impl/postgres/factory.py), the low 32 bits of its hash in `objid`.
WAITING = """
SELECT CASE WHEN l.locktype <> 'advisory' THEN l.locktype
            WHEN CAST(CAST(l.objid AS text) AS bigint) = hashtextextended('scanwatch migrate', 0) & 4294967295
                THEN 'advisory: schema check'
            ELSE 'advisory: other' END
FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
WHERE a.datname = current_database() AND a.wait_event_type = 'Lock'
"""


def sync_env(base_url: str, key: str, db: str, name: str, folder: Path) -> dict[str, str]:
    """The environment of one pod's sync: a workspaces file following the one workspace behind `key` under
    its own name (a name is bound to one workspace in the history), nothing inherited from ours."""
    file = folder / f"{name}.yml"
    file.write_text(f"workspaces:\n  - name: {name}\n    api_key_env: BENCH_KEY\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env.update({"SCANWATCH_WORKSPACES_FILE": str(file), "SCANWATCH_BASE_URL": base_url, "BENCH_KEY": key,
                "SCANWATCH_DB": db, "PYTHONPATH": str(ROOT)})
    return env


def start_sync(env: dict[str, str], name: str, whole: bool) -> subprocess.Popen[str]:
    """`scanwatch sync`, or (`whole` false) what it runs less the metrics snapshot: the ingestion assets and the
    history checks (benchmarks/engines.py's child), for a commit whose snapshot is not built on PostgreSQL."""
    cmd = ["pipelines.cli", "sync", "--quiet"] if whole else ["benchmarks.engines", "--child", "--workspace", name]
    return subprocess.Popen([sys.executable, "-m", *cmd], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


class LockWaits(Sampler):
    """Backends of one database seen waiting on a heavyweight lock, sampled every 0.1 s while it runs."""

    interval = SAMPLE_SECONDS

    def __init__(self, url: str) -> None:
        import psycopg

        super().__init__()
        self.conn = psycopg.connect(url, autocommit=True, application_name="bench-sampler")
        self.samples: Counter[str] = Counter()
        self.most_at_once = 0

    def sample(self) -> None:
        rows = self.conn.execute(WAITING).fetchall()
        self.samples.update(kind for (kind,) in rows)
        self.most_at_once = max(self.most_at_once, len(rows))

    def close(self) -> None:
        self.conn.close()

    def summary(self) -> dict:
        return {"samples": sum(self.samples.values()), "by_lock_type": dict(self.samples),
                "most_at_once": self.most_at_once,
                "approx_seconds_waited": round(sum(self.samples.values()) * SAMPLE_SECONDS, 1)}


class HostCores(Sampler):
    """How busy the host's cores were, every 0.1 s: a run whose average leaves cores free can still spend much of
    its wall with every core taken, when its processes need the CPU at the same moments."""

    interval = SAMPLE_SECONDS

    def __init__(self) -> None:
        super().__init__()
        self.last = self._read()
        self.busy: list[float] = []

    @staticmethod
    def _read() -> tuple[int, int]:
        fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # all jiffies, and idle + iowait

    def sample(self) -> None:
        now = self._read()
        total, idle = now[0] - self.last[0], now[1] - self.last[1]
        self.last = now
        if total > 0:
            self.busy.append(1 - idle / total)

    def summary(self) -> dict:
        saturated = sum(b >= 0.95 for b in self.busy)
        return {"samples": len(self.busy),
                "all_cores_busy_share": round(saturated / len(self.busy), 2) if self.busy else 0.0}


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, reaped: bool = True) -> float:
    """CPU seconds a process has used (user and system), with those of the children it reaped (0 once gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15 if reaped else 13]) / TICKS


def server_cpu_seconds(data_dir: Path) -> float:
    """The PostgreSQL server's CPU seconds so far: the postmaster with the backends it reaped, and the live ones."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    total = cpu_seconds(postmaster)
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a backend that ended meanwhile: the postmaster's reaped time has it
        if fields[1] == str(postmaster):
            total += cpu_seconds(int(status.parent.name), reaped=False)
    return total


def run_prestarted(envs: list[dict[str, str]]) -> dict:
    """K syncs forked together from one process that imported everything before the clock started
    (benchmarks/prestarted.py); each one's wall and CPU, and the wall of them all."""
    # The workspaces are Dagster's partitions, read when the assets are imported: the process that imports them
    # follows every name the children sync under, each child then its own one.
    names = Path(envs[0]["SCANWATCH_WORKSPACES_FILE"]).with_name("all.yml")
    names.write_text("workspaces:\n" + "".join(f"  - name: ws{n + 1}\n    api_key_env: BENCH_KEY\n"
                                               for n in range(len(envs))))
    zygote = subprocess.Popen([sys.executable, "-m", "benchmarks.prestarted"], cwd=ROOT,
                              env={**envs[0], "SCANWATCH_WORKSPACES_FILE": str(names)}, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    if zygote.stdout.readline().strip() != "ready":
        raise RuntimeError("benchmarks.prestarted did not start")
    started = time.perf_counter()
    zygote.stdin.write(json.dumps([[f"ws{n + 1}", env] for n, env in enumerate(envs)]) + "\n")
    zygote.stdin.close()
    line = zygote.stdout.readline()  # the last child's end, not the importing process's own exit
    wall = time.perf_counter() - started
    zygote.wait(120)
    children = json.loads(line)
    failures = [c["output"] for c in children if c["code"] != 0]
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(envs)} syncs failed: {failures[0]}")
    walls = [c["seconds"] for c in children]
    return {"wall_seconds": round(wall, 1), "cpu_seconds": round(sum(c["cpu_seconds"] for c in children), 1),
            "process_seconds": {"min": round(min(walls), 1), "max": round(max(walls), 1)}}


def run_syncs(base_url: str, keys: list[str], db: str, whole: bool, prestarted: bool = False) -> dict:
    """K sync processes started together; each one's wall, and the wall of them all."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    folder = Path(tempfile.mkdtemp(prefix="bench-pg-writers-"))
    envs = [sync_env(base_url, key, db, f"ws{n + 1}", folder) for n, key in enumerate(keys)]
    if prestarted:
        return run_prestarted(envs)
    started = time.perf_counter()
    procs = [start_sync(env, f"ws{n + 1}", whole) for n, env in enumerate(envs)]
    walls, failures = [], []
    for proc in procs:
        out, err = proc.communicate(timeout=3600)
        walls.append(time.perf_counter() - started)
        if proc.returncode != 0:
            failures.append((err.strip() or out.strip())[-500:])
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(keys)} syncs failed: {failures[0]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_seconds": round(time.perf_counter() - started, 1),
            "cpu_seconds": round(after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, 1),
            "process_seconds": {"min": round(min(walls), 1), "max": round(max(walls), 1)}}


def minimum_requests(scale: str, seed: int, count: int) -> list[int]:
    """What each workspace's first sync needs at least, walked on an unlimited copy of the same worlds."""
    from benchmarks.oracle import Oracle

    with SimProcess(scale=scale, seed=seed, rate_limit=1_000_000, workspaces=count) as sim:
        floors = []
        for key in sim.keys:
            oracle = Oracle(sim.base_url, key)
            try:
                floors.append(oracle.state().minimum_requests)
            finally:
                oracle.close()
    return floors


def _load() -> str:
    """The host's load average (1, 5, 15 minutes): other work on the same cores moves every wall time."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(counts: list[int], scale: str, limit: int, window: float, whole: bool, migrated: bool,
            seed: int = 7, prestarted: bool = False, rounds: int = 1) -> dict:
    from tests.pg_server import PgServer

    most = max(counts)
    floors = minimum_requests(scale, seed, most)
    server = PgServer.start(Path(tempfile.mkdtemp(prefix="bench-pg-writers-")))
    rows = []
    try:
        with SimProcess(scale=scale, seed=seed, rate_limit=limit, rate_window=window, workspaces=most) as sim:
            for k in [*counts, counts[0]] * rounds:
                name = server.create_database()
                db = server.url(name)
                if migrated:  # as a deployment's first run (or `scanwatch migrate`) leaves it
                    from pipelines.storage import connect

                    connect(db).close()
                sim.wait_for_window()  # every key starts with a fresh budget
                load_before = _load()
                before = sim.request_count()
                cpu_before = cpu_seconds(sim.proc.pid), server_cpu_seconds(server.data_dir)
                with LockWaits(db) as waits, HostCores() as cores:
                    row = run_syncs(sim.base_url, sim.keys[:k], db, whole, prestarted)
                row["all_cores_busy_share"] = cores.summary()["all_cores_busy_share"]
                row["simulator_cpu_seconds"] = round(cpu_seconds(sim.proc.pid) - cpu_before[0], 1)
                row["server_cpu_seconds"] = round(server_cpu_seconds(server.data_dir) - cpu_before[1], 1)
                row["busy_cores"] = round((row["cpu_seconds"] + row["simulator_cpu_seconds"]
                                           + row["server_cpu_seconds"]) / row["wall_seconds"], 2)
                synced = int(server.psql("SELECT count(DISTINCT workspace_id) FROM issues", name))
                if synced != k:
                    raise RuntimeError(f"{k} syncs left issues of {synced} workspaces")
                row.update(workspaces=k, requests=sim.request_count() - before, minimum=sum(floors[:k]),
                           lock_waits=waits.summary(), load_before=load_before, load_after=_load())
                row["requests_over_minimum"] = round(row["requests"] / row["minimum"], 3)
                rows.append(row)
                print(f"[bench] K={k}: {row['wall_seconds']} s, {row['requests']} requests "
                      f"(minimum {row['minimum']}), lock-wait samples {row['lock_waits']['samples']}, "
                      f"load {row['load_before']} -> {row['load_after']}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    # A sync's wall moves in steps of one rate-limit window (its last requests either fit the burst of a window
    # or are spread across it): with several rounds the median says what is typical, each row what happened.
    base = statistics.median(r["wall_seconds"] for r in rows if r["workspaces"] == counts[0])
    for r in rows:
        r["ratio_to_one"] = round(r["wall_seconds"] / base, 2)
    medians = {}
    for k in counts:
        walls = [r["wall_seconds"] for r in rows if r["workspaces"] == k]
        medians[str(k)] = {"walls": walls, "median_seconds": statistics.median(walls),
                           "ratio_to_one": round(statistics.median(walls) / base, 2)}
    command = "scanwatch sync" if whole else "ingestion + checks"
    if prestarted:
        command += ", forked after the imports"
    return {"benchmark": "pg_writers", "scale": scale, "command": command,
            "rate_limit": f"{limit} per {window:g} s per key", "schema": "migrated" if migrated else "empty",
            "floor_seconds_per_workspace": round(max(0.0, floors[0] - limit) / limit * window, 1),
            "goal": "K = 16 at most 1.3 x K = 1", "rounds": rounds, "medians": medians, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,4,16", help="the K to measure, comma-separated, the first being 1")
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--limit", type=int, default=20, help="requests per window per key")
    parser.add_argument("--window", type=float, default=10.0, help="seconds of one rate-limit window")
    parser.add_argument("--fresh", action="store_true",
                        help="give each K an empty database (its syncs create the schema), not a migrated one")
    parser.add_argument("--whole-sync", action="store_true",
                        help="run `scanwatch sync` itself (its metrics snapshot included) in each process")
    parser.add_argument("--prestarted", action="store_true",
                        help="fork the K syncs from one process that imported Dagster and scanwatch before the clock "
                             "started, as pods on separate nodes pay their start-up on their own cores")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure the counts (and K = 1 again) this many times; ratios to K = 1's median")
    args = parser.parse_args(argv)
    if args.prestarted and args.whole_sync:
        parser.error("--prestarted forks the ingestion and checks; it does not run `scanwatch sync` itself")
    result = measure([int(k) for k in args.counts.split(",")], args.scale, args.limit, args.window, args.whole_sync,
                     not args.fresh, prestarted=args.prestarted, rounds=args.rounds)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pg_writers.json").write_text(json.dumps(result, indent=2))
    print(f"{result['command']} per process, {args.scale} worlds, {result['schema']} database, "
          f"{result['rate_limit']} (a workspace's limit alone takes {result['floor_seconds_per_workspace']} s); "
          f"K = 1 first and last, {args.rounds} round(s), ratios to K = 1's median")
    print("K | wall | ratio to K = 1 | process walls (min / max) | CPU of the syncs / simulator / server "
          "(cores kept busy; share of the wall with every host core busy) | requests / minimum | "
          "lock-wait samples (by type; most at once) | load before -> after")
    for r in result["rows"]:
        w, p = r["lock_waits"], r["process_seconds"]
        print(f"{r['workspaces']} | {r['wall_seconds']} s | {r['ratio_to_one']} x | {p['min']} / {p['max']} s | "
              f"{r['cpu_seconds']} / {r['simulator_cpu_seconds']} / {r['server_cpu_seconds']} s "
              f"({r['busy_cores']}; every core busy {r['all_cores_busy_share']:.0%} of the wall) | "
              f"{r['requests']} / {r['minimum']} ({r['requests_over_minimum']} x) | "
              f"{w['samples']} ({w['by_lock_type'] or '-'}; {w['most_at_once']}) | "
              f"{r['load_before']} -> {r['load_after']}")
    for k, m in result["medians"].items():
        print(f"K = {k}: median {m['median_seconds']} s ({m['ratio_to_one']} x K = 1's median) of "
              + ", ".join(f"{w} s" for w in m["walls"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
