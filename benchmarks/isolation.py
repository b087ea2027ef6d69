"""`python -m benchmarks.isolation [--checkout DIR] [--latency-ms 1500]`: a healthy workspace beside a slow one.

Two simulators, one slowed with the latency fault, followed from one workspaces file (the slow one listed
first). Measured with the code of ``--checkout`` (a scanwatch source tree; by default this one; for the
"before" column, `git archive <commit> | tar -x -C /tmp/old`):

- `scanwatch sync` on a fresh history, without and with `DAGSTER_HOME`: when each workspace landed (its last
  asset recorded in `sync_runs`), in seconds from the command's start, and the command's wall time;
- one evaluation of the scan-finished sensor with five scans queued in the slow workspace (25 s an answer)
  and one in the healthy one: how long the tick took, and which workspaces got a run request.
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

import duckdb

from simulator.testing import SimConfig, serve_simulator

ROOT = Path(__file__).resolve().parents[1]
FILE = """workspaces:
  - name: slow
    base_url: {slow}
    api_key_env: SCANWATCH_KEY_SLOW
  - name: healthy
    base_url: {fast}
    api_key_env: SCANWATCH_KEY_HEALTHY
"""
SENSOR = """
import json, time
import dagster as dg
from pipelines.defs.resources import default_resources
from pipelines.defs.sensors import scan_finished_sensor
started = time.monotonic()
with dg.build_sensor_context(resources=default_resources()) as ctx:
    result = scan_finished_sensor(ctx)
print(json.dumps({"seconds": round(time.monotonic() - started, 1),
                  "runs": [] if isinstance(result, dg.SkipReason) else [r.partition_key for r in result]}))
"""


def _sync(checkout: Path, env: dict[str, str], *args: str) -> tuple[int, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet", *args], env=env,
                          cwd=checkout, capture_output=True, text=True)
    return done.returncode, time.monotonic() - started


def _landed(db: Path, since: float) -> dict[str, float]:
    with duckdb.connect(str(db), read_only=True) as conn:
        rows = conn.execute("SELECT a.workspace_label, epoch(max(s.finished_at)) FROM sync_runs s "
                            "JOIN accounts a USING (workspace_id) GROUP BY 1").fetchall()
    return {name: round(end - since, 1) for name, end in rows}


def _queue_scans(sim, n: int) -> None:
    from benchmarks.oracle import Oracle

    oracle = Oracle(sim.base_url, sim.api_key)
    sites = [t["id"] for p in oracle.walk("/projects") if not p["paused"] for t in p["targets"]
             if t["kind"] == "domain"][:n]
    for site in sites:
        oracle.http.post(f"/targets/{site}/scans", json={}, headers={"Idempotency-Key": f"bench-{site}"})


def run(checkout: Path, latency_ms: int) -> dict:
    config = dict(scale="small", clock="driven", control=True, rate_limit=100000)
    out: dict = {"checkout": str(checkout), "latency_ms": latency_ms}
    with serve_simulator(SimConfig(seed=21, **config)) as slow, serve_simulator(SimConfig(seed=22, **config)) as fast:
        for mode in ("threads (no DAGSTER_HOME)", "DAGSTER_HOME"):
            tmp = Path(tempfile.mkdtemp(prefix="scanwatch-isolation-"))
            (tmp / "workspaces.yml").write_text(FILE.format(slow=slow.base_url, fast=fast.base_url))
            env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
            env.update({"SCANWATCH_WORKSPACES_FILE": str(tmp / "workspaces.yml"), "SCANWATCH_DB": str(tmp / "h.db"),
                        "SCANWATCH_KEY_SLOW": slow.api_key, "SCANWATCH_KEY_HEALTHY": fast.api_key,
                        "PYTHONPATH": str(checkout)})
            if mode == "DAGSTER_HOME":
                (tmp / "home").mkdir()
                env["DAGSTER_HOME"] = str(tmp / "home")
            slow.set_faults(latency_ms=latency_ms)
            since = time.time()
            code, wall = _sync(checkout, env)
            slow.clear_faults()
            out[mode] = {"exit": code, "wall_s": round(wall, 1), "landed_s": _landed(tmp / "h.db", since)}
        # The sensor, on the last history: scans queued in both, finished, then the slow service slowed.
        env.pop("DAGSTER_HOME", None)
        _queue_scans(slow, 5)
        _queue_scans(fast, 1)
        _sync(checkout, env, "--full-reconcile")
        slow.advance(3600)
        fast.advance(3600)
        slow.set_faults(latency_ms=25_000)
        done = subprocess.run([sys.executable, "-c", SENSOR], env=env, cwd=checkout, capture_output=True, text=True)
        slow.clear_faults()
        out["sensor"] = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else done.stderr[-500:]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="scanwatch source tree to measure")
    parser.add_argument("--latency-ms", type=int, default=1500, help="the slow workspace's delay per answer")
    args = parser.parse_args()
    print(json.dumps(run(args.checkout.resolve(), args.latency_ms), indent=2))


if __name__ == "__main__":
    main()
