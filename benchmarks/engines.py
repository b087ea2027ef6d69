"""PostgreSQL against DuckDB: one world's first sync and unchanged re-sync into each engine.

`python -m benchmarks.engines [--scale large] [--repeats 2]`. The simulator's world (seed 7) runs in its own
process with the rate limit out of the way, so scanwatch and its database are what is measured. For each
engine, a fresh history, then a first sync and an unchanged re-sync, each in its own process running the
ingestion assets and the history checks (what `scanwatch sync` runs, less the metrics snapshot, which is not
built from a PostgreSQL history yet): wall time, the child's peak RSS (its own `VmHWM`), the issue merge's
seconds; for PostgreSQL also the server's peak memory (the private RSS of all its processes, sampled every
0.2 s, plus its shared buffers); and the host's load average after each sync. The engines' order
alternates from one repeat to the next. The server is a scratch cluster (tests/pg_server.py: PostgreSQL 15, fsync
and synchronous commit off, default shared buffers of 128 MB) on the same 2 cores.

Prints a table and writes `benchmarks/results/engines.json`. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.sampling import Sampler

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RAISED = 1_000_000


def _child(workspace: str = "default") -> int:
    """One sync in this process: the ingestion assets and the checks of `workspace` (its name in
    SCANWATCH_WORKSPACES_FILE, or default), from the environment; prints metadata."""
    import dagster as dg

    from pipelines.defs.assets import ALL_ASSETS
    from pipelines.defs.checks import history_checks
    from pipelines.defs.partitions import register
    from pipelines.defs.resources import default_resources

    with dg.DagsterInstance.ephemeral() as instance:
        register(instance, [workspace])
        result = dg.materialize(
            [*ALL_ASSETS, *history_checks], resources=default_resources(), instance=instance,
            selection=dg.AssetSelection.all() - dg.AssetSelection.assets("metrics_snapshot"),
            run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
            raise_on_error=False, partition_key=workspace)
        metadata = {}
        for event in result.get_asset_materialization_events():
            mat = event.event_specific_data.materialization
            metadata[mat.asset_key.to_user_string()] = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
        errors = [e.step_failure_data.error.message.strip()[:1000] for e in result.get_step_failure_events()]
        steps = _step_seconds(instance, result.run_id)
    print(json.dumps({"success": result.success, "metadata": metadata, "errors": errors, "steps": steps},
                     default=str))
    return 0 if result.success else 1


def _step_seconds(instance, run_id: str) -> dict[str, float]:
    """Each step's seconds, from its start to its end as the run's event log has them: where a sync's time went."""
    started: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or event.step_key is None:
            continue
        if event.event_type_value == "STEP_START":
            started[event.step_key] = entry.timestamp
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE") and event.step_key in started:
            seconds[event.step_key] = round(entry.timestamp - started[event.step_key], 2)
    return seconds


class ServerMemory(Sampler):
    """The PostgreSQL cluster's peak memory while it runs: private RSS of every server process, summed."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__()
        self.pid = int((data_dir / "postmaster.pid").read_text().split()[0])
        self.peak_kib = 0

    def _processes(self) -> list[int]:
        found = [self.pid]
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            except OSError:
                continue
            if fields.get("PPid", "").strip() == str(self.pid):
                found.append(int(status.parent.name))
        return found

    def _private_kib(self, pid: int) -> int:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def sample(self) -> None:
        self.peak_kib = max(self.peak_kib, sum(self._private_kib(p) for p in self._processes()))


def _sync(sim, db: str, server=None) -> dict:
    from benchmarks.syncing import measured_child

    memory = ServerMemory(server.data_dir) if server is not None else None
    before = sim.request_count()
    if memory:
        memory.__enter__()
    try:
        code, seconds, rss, out = measured_child([sys.executable, "-m", "benchmarks.engines", "--child"],
                                                 env=sim.env(db), timeout=7200)
    finally:
        if memory:
            memory.__exit__()
    body = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"success": False}
    if code != 0 or not body.get("success"):
        raise RuntimeError(f"sync into {db.split('@')[-1]} failed: {out[-2000:]}")
    issues = body["metadata"].get("issues", {})
    row = {"seconds": round(seconds, 2), "peak_rss_mib": round(rss, 1), "requests": sim.request_count() - before,
           "load": [round(x, 2) for x in os.getloadavg()],
           "merge_seconds": issues.get("merge_seconds"), "issues_read": issues.get("issues_read"),
           "steps": body.get("steps", {})}
    if memory:
        row["server_private_mib"] = round(memory.peak_kib / 1024, 1)
    return row


def measure(scale: str, repeats: int) -> dict:
    from benchmarks.sim import SimProcess
    from tests.pg_server import PgServer

    work = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    server = PgServer.start()
    runs: dict[str, list[dict]] = {"duckdb": [], "postgres": []}
    try:
        shared = server.psql("SHOW shared_buffers").strip()
        with SimProcess(scale=scale, rate_limit=RAISED) as sim:
            for n in range(repeats):
                # The order alternates: the host's load drifts over minutes, and each engine takes its turn first.
                for engine in ("duckdb", "postgres") if n % 2 == 0 else ("postgres", "duckdb"):
                    if engine == "duckdb":
                        db = str(work / f"history-{n}.duckdb")
                    else:
                        db = server.url(server.create_database())
                    first = _sync(sim, db, server if engine == "postgres" else None)
                    resync = _sync(sim, db, server if engine == "postgres" else None)
                    runs[engine].append({"first": first, "resync": resync})
                    print(f"[bench] {engine} run {n + 1}: first {first['seconds']} s, re-sync {resync['seconds']} s",
                          file=sys.stderr, flush=True)
    finally:
        server.stop()

    def med(engine: str, phase: str, key: str) -> float:
        return round(statistics.median(r[phase][key] for r in runs[engine]), 2)

    summary = {phase: {engine: {key: med(engine, phase, key) for key in ("seconds", "peak_rss_mib", "merge_seconds")}
                       for engine in runs} for phase in ("first", "resync")}
    for phase in summary:
        summary[phase]["postgres"]["server_private_mib"] = med("postgres", phase, "server_private_mib")
        summary[phase]["ratio"] = round(summary[phase]["postgres"]["seconds"] / summary[phase]["duckdb"]["seconds"], 2)
    return {"scale": scale, "repeats": repeats, "issues": runs["duckdb"][0]["first"]["issues_read"],
            "shared_buffers": shared, "summary": summary, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workspace", default="default", help=argparse.SUPPRESS)
    parser.add_argument("--scale", default="large")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.workspace)
    result = measure(args.scale, args.repeats)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "engines.json").write_text(json.dumps(result, indent=2))
    print(f"{result['issues']:,} issues ({args.scale}), median of {args.repeats}; PostgreSQL shared_buffers "
          f"{result['shared_buffers']}")
    print("phase | DuckDB wall | PostgreSQL wall | ratio | scanwatch peak RSS (DuckDB / PostgreSQL) | "
          "issue merge (DuckDB / PostgreSQL) | server private memory")
    for phase, s in result["summary"].items():
        d, p = s["duckdb"], s["postgres"]
        print(f"{phase} | {d['seconds']} s | {p['seconds']} s | {s['ratio']} x | {d['peak_rss_mib']} / "
              f"{p['peak_rss_mib']} MiB | {d['merge_seconds']} / {p['merge_seconds']} s | "
              f"{p['server_private_mib']} MiB")
    first = {engine: result["runs"][engine][0] for engine in ("duckdb", "postgres")}
    print("step (first run) | first sync: DuckDB / PostgreSQL | re-sync: DuckDB / PostgreSQL")
    for step in first["postgres"]["first"]["steps"]:
        print(f"{step} | " + " | ".join(
            f"{first['duckdb'][phase]['steps'].get(step)} / {first['postgres'][phase]['steps'].get(step)} s"
            for phase in ("first", "resync")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
