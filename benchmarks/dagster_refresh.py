"""`python -m benchmarks.dagster_refresh [--workspaces 100] [--tree DIR]`: one scheduled refresh of N unchanged
workspaces through Dagster, as a deployment runs it.

The simulator's small world (3 projects) in each of N Pro workspaces, one workspaces file listing them, a
first `scanwatch sync` of them all; then Dagster's daemon (`dagster-daemon run -m pipelines.definitions`)
on an instance made from the repository's `dagster.yaml` (its queued run coordinator, 4 runs at once, the
`duckdb` pool), or with `--postgres` on the deployment's instance (`deploy/dagster/dagster.yaml`: runs, events
and ticks in PostgreSQL) and the history in PostgreSQL too, both on a real server; `refresh_schedule` set to
tick once, a minute or two after the daemon starts. Printed:
the runs the tick asked for (each one a process of its own), how many succeeded, the wall time from the tick
to the last run's end, and the CPU seconds of the whole Dagster process tree (daemon, code server, run
processes) during that time, less what the same tree spent per second while idle before the tick (its
sensors), per workspace's run (a batch whose process never started ran none); on PostgreSQL also the
server's CPU over the tick (the history's and Dagster's instance's, sensors included) and the connections
opened to Dagster's database, per workspace's run; why a run process of the tick did not succeed; and the
requests per workspace as the simulator counted them (two is the
contract's minimum for an unchanged workspace), and each sensor's tick time over the interval (median and
slowest: Dagster gives a sensor 60 seconds). `--tree DIR` runs another source tree (`git archive <commit>
| tar -x -C DIR`) with this checkout's interpreter, to compare before and after. Reported, never asserted.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.sim import SimProcess
from benchmarks.workspaces import workspaces_environment

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RAISED = 1_000_000
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    """The process and its live descendants. A child is listed under the thread that started it, so every
    thread's list is read: the code server starts each run's process from one of its request threads."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            threads = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{p}/task/{thread}/children", encoding="ascii") as fh:
                    todo += [int(c) for c in fh.read().split()]
            except OSError:
                continue
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds of the process and its live descendants, each with the children it has reaped."""
    total = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / TICKS_PER_SECOND


class Sampled:
    """CPU of every process ever seen in the tree, each its own (user + system) at its last sample: unlike a
    parent's count of its reaped children, it keeps a process whose parent never reaps it (a fork server's)."""

    def __init__(self, pid: int):
        self.pid, self.seen = pid, {}

    def sample(self) -> float:
        for p in _tree(self.pid):
            try:
                with open(f"/proc/{p}/stat", encoding="ascii") as fh:
                    rest = fh.read().rpartition(")")[2]
                    fields = rest.split()
            except OSError:
                continue
            key = (p, fields[19])  # a pid with its start time: a pid reused later is another process
            self.seen[key] = (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND
        return sum(self.seen.values())


def _runs(home: Path, env: dict[str, str]) -> list:
    import dagster as dg

    saved = dict(os.environ)
    os.environ.update({k: v for k, v in env.items() if k.startswith("DAGSTER_PG_")})
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            return [r.dagster_run for r in instance.get_run_records()]
    finally:
        os.environ.clear()
        os.environ.update(saved)


def sensor_ticks(home: Path, since: float, env: dict[str, str]) -> dict[str, dict]:
    """Each sensor's ticks since `since`: how many, the median and the slowest tick's seconds."""
    import dagster as dg
    from dagster._core.scheduler.instigation import InstigatorType

    saved = dict(os.environ)
    os.environ.update({k: v for k, v in env.items() if k.startswith("DAGSTER_PG_")})
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            found = {}
            for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
                ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, after=since, limit=10_000)
                spans = sorted(t.end_timestamp - t.timestamp for t in ticks if t.end_timestamp)
                if spans:
                    found[state.instigator_name] = {"ticks": len(spans), "median_s": round(spans[len(spans) // 2], 2),
                                                    "slowest_s": round(spans[-1], 2)}
            return found
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _why_not(home: Path, env: dict[str, str], runs: list) -> list[str]:
    """Each run process of the tick that did not succeed: its status and the message of its failure."""
    import dagster as dg

    saved = dict(os.environ)
    os.environ.update({k: v for k, v in env.items() if k.startswith("DAGSTER_PG_")})
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            found = []
            for run in runs:
                failures = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
                found.append(f"{run.tags.get('scanwatch/workspaces', run.run_id)}: {run.status.value}"
                             f"{': ' + failures[-1].message[:300] if failures else ''}")
            return found
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _sessions(server: Any, env: dict[str, str]) -> int:
    """Connections opened so far to Dagster's instance database (PostgreSQL counts them per database)."""
    if server is None:
        return 0
    db = env["DAGSTER_PG_DB"]
    return int(server.psql(f"SELECT sessions FROM pg_stat_database WHERE datname = '{db}'").strip() or 0)


def measure(count: int, tree: Path = ROOT, lead_seconds: float = 75.0, batch: int = 1,
            postgres: bool = False, cli_resync: bool = False) -> dict:
    from tests.pg_server import PgServer

    server = PgServer.start() if postgres else None
    try:
        return _measure(count, tree, lead_seconds, batch, server, cli_resync)
    finally:
        if server:
            server.stop()


def _measure(count: int, tree: Path, lead_seconds: float, batch: int, server: Any, cli_resync: bool) -> dict:
    from dagster._core.storage.dagster_run import FINISHED_STATUSES

    with SimProcess(scale="small", seed=7, rate_limit=RAISED, workspaces=count) as sim, \
            tempfile.TemporaryDirectory(prefix="scanwatch-bench-dagster-") as tmp:
        folder = Path(tmp)
        home = folder / "dagster_home"
        home.mkdir()
        history = server.url(server.create_database()) if server else str(folder / "history.duckdb")
        env = {**workspaces_environment(sim, count, folder, history),
               "SCANWATCH_SNAPSHOT": str(folder / "snapshot"), "PYTHONPATH": str(tree),
               "SCANWATCH_SCANS_CRON": "0 0 1 1 *", "SCANWATCH_REFRESH_BATCH": str(batch)}
        if server:
            shutil.copy(tree / "deploy" / "dagster" / "dagster.yaml", home / "dagster.yaml")
            env.update({"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(server.port),
                        "DAGSTER_PG_USER": "postgres", "DAGSTER_PG_PASSWORD": server.password,
                        "DAGSTER_PG_DB": server.create_database()})
        else:
            shutil.copy(tree / "dagster.yaml", home / "dagster.yaml")
        from benchmarks.many_workspaces import cli_sync, server_cpu  # it imports Sampled from here

        syncs = {"first": cli_sync(sim, count, env, tree=tree, server=server)}
        print(f"[bench] first sync {syncs['first']}", file=sys.stderr, flush=True)
        if cli_resync:
            syncs["unchanged"] = cli_sync(sim, count, env, tree=tree, server=server)
            print(f"[bench] unchanged sync {syncs['unchanged']}", file=sys.stderr, flush=True)
        tick = datetime.datetime.now(datetime.UTC).replace(second=0, microsecond=0) + datetime.timedelta(
            seconds=lead_seconds + 60)
        tick = tick.replace(second=0)
        env.update({"DAGSTER_HOME": str(home), "SCANWATCH_REFRESH_CRON": f"{tick.minute} {tick.hour} * * *"})
        before = sim.request_count()
        log = (folder / "daemon.log").open("w")
        daemon = subprocess.Popen([str(Path(sys.executable).parent / "dagster-daemon"), "run", "-m",
                                   "pipelines.definitions"], env=env, cwd=tree, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        sampled = Sampled(daemon.pid)
        try:
            time.sleep(max(0.0, tick.timestamp() - time.time() - 40))  # start-up over; the sensors idle
            idle_from, idle_cpu, idle_sampled = time.time(), tree_cpu(daemon.pid), sampled.sample()
            time.sleep(max(0.0, tick.timestamp() - time.time()))
            at_tick, cpu_at_tick, sampled_at_tick = time.time(), tree_cpu(daemon.pid), sampled.sample()
            server_at_tick, sessions_at_tick = server_cpu(server), _sessions(server, env)
            load = [os.getloadavg()[0]]
            idle_rate = (cpu_at_tick - idle_cpu) / (at_tick - idle_from)
            idle_sampled_rate = (sampled_at_tick - idle_sampled) / (at_tick - idle_from)
            last_busy, ended, polled = time.time(), None, 0.0
            while time.time() - at_tick < 5400:
                assert daemon.poll() is None, (folder / "daemon.log").read_text()[-3000:]
                sampled.sample()
                if time.time() - polled >= 2.0:
                    polled = time.time()
                    runs = _runs(home, env)
                    if runs and all(r.status in FINISHED_STATUSES for r in runs):
                        if ended is None:
                            ended, cpu_end, sampled_end = time.time(), tree_cpu(daemon.pid), sampled.sample()
                            server_end, sessions_end = server_cpu(server), _sessions(server, env)
                        if time.time() - last_busy > 15:  # no run queued behind them
                            break
                    else:
                        ended, last_busy = None, time.time()
                    load.append(os.getloadavg()[0])
                time.sleep(0.25)
            requests = sim.request_count() - before
        finally:
            os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
            log.close()
        runs = _runs(home, env)
        sensors = sensor_ticks(home, at_tick, env)
        wall = (ended or time.time()) - at_tick
        reaped = cpu_end - cpu_at_tick - idle_rate * wall
        cpu = sampled_end - sampled_at_tick - idle_sampled_rate * wall
        launched = [r for r in runs if r.tags.get("dagster/schedule_name") == "refresh_schedule"]
        workspace_runs = [r for r in runs if r.tags.get("dagster/partition")]
        ran = max(1, len(workspace_runs))  # a batch that never started ran none of its workspaces
        not_done = _why_not(home, env, [r for r in launched if r.status.value != "SUCCESS"])
        return {"workspaces": count, "batch": batch, "tree": str(tree), "postgres": server is not None,
                "run_processes": len(launched), "sensors": sensors, "cli_syncs": syncs,
                "workspace_runs": len(workspace_runs),
                "succeeded": sum(1 for r in workspace_runs if r.status.value == "SUCCESS"),
                "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "cpu_per_workspace_s": round(cpu / ran, 3),
                "cpu_reaped_s": round(reaped, 1), "idle_cpu_per_s": round(idle_sampled_rate, 3),
                "requests_per_workspace": round(requests / count, 2),
                # one server holds the history and Dagster's instance: its CPU over the tick is both
                "server_cpu_s": round(server_end - server_at_tick, 1) if server else None,
                "server_cpu_per_workspace_s": round((server_end - server_at_tick) / ran, 3) if server else None,
                "dagster_sessions_per_workspace": round((sessions_end - sessions_at_tick) / ran, 1)
                if server else None,
                "run_processes_not_succeeded": not_done,
                "load_average": {"median": round(sorted(load)[len(load) // 2], 1), "max": round(max(load), 1)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1, help="SCANWATCH_REFRESH_BATCH: workspaces per run")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose scanwatch runs")
    parser.add_argument("--postgres", action="store_true",
                        help="the deployment's instance (deploy/dagster/dagster.yaml) and the history on PostgreSQL")
    parser.add_argument("--cli-resync", action="store_true",
                        help="also time an unchanged `scanwatch sync` of them all before the daemon's tick")
    args = parser.parse_args(argv)
    row = measure(args.workspaces, args.tree.resolve(), batch=args.batch, postgres=args.postgres,
                  cli_resync=args.cli_resync)
    RESULTS.mkdir(parents=True, exist_ok=True)
    engine = "postgres" if args.postgres else "duckdb"
    (RESULTS / f"dagster_refresh_{engine}_{args.workspaces}_{args.batch}.json").write_text(json.dumps(row, indent=2))
    print("workspaces | batch | run processes | workspace runs (succeeded) | wall | CPU | CPU per workspace | "
          "requests per workspace")
    print(f"{row['workspaces']} | {row['batch']} | {row['run_processes']} | {row['workspace_runs']} "
          f"({row['succeeded']}) | {row['wall_s']} s | {row['cpu_s']} s | {row['cpu_per_workspace_s']} s | "
          f"{row['requests_per_workspace']}")
    if row["postgres"]:
        print(f"PostgreSQL server (history and Dagster's instance) over the tick: {row['server_cpu_s']} s CPU, "
              f"{row['server_cpu_per_workspace_s']} s a workspace; connections to Dagster's database a "
              f"workspace: {row['dagster_sessions_per_workspace']}")
    for line in row["run_processes_not_succeeded"]:
        print(f"run process not succeeded: {line}")
    print(f"load average during the tick: median {row['load_average']['median']}, max {row['load_average']['max']}")
    for name, sync in row["cli_syncs"].items():
        print(f"scanwatch sync, {name}: {sync}")
    for name, ticks in sorted(row["sensors"].items()):
        print(f"sensor {name}: {ticks['ticks']} ticks, median {ticks['median_s']} s, slowest {ticks['slowest_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
