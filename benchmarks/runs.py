"""A scheduled refresh run against `scanwatch sync` on the same work, as the demo runs them.

The refresh run is `dagster job execute -j refresh_job` against a `DAGSTER_HOME` holding the project's
`dagster.yaml` (pool limit included), so it runs with the executor the job declares, as a schedule's run
would; `scanwatch sync` is the command. Both start on a history already synced once, against the small
world with nothing changed in between, so each does the demo's steady-state work (2 requests). Median of
a few runs after a warm-up; printed, never asserted.

    .venv/bin/python -m benchmarks.runs [--repeats 3] [--scale small]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.sim import SimProcess

ROOT = Path(__file__).resolve().parent.parent


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, step processes included): on a shared host the wall time
    measures the host as much as the run, the CPU time what the run itself costs."""
    import os
    import resource

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    started, cpu_before = time.perf_counter(), cpu()
    proc = subprocess.run(cmd, env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    return time.perf_counter() - started, cpu() - cpu_before


def measure(repeats: int = 3, scale: str = "small") -> dict[str, object]:
    bindir = Path(sys.executable).parent
    work = Path(tempfile.mkdtemp(prefix="scanwatch-runs-"))
    home = work / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    try:
        with SimProcess(scale=scale, rate_limit=100_000) as sim:
            env = {**sim.env(str(work / "history.duckdb")), "DAGSTER_HOME": str(home),
                   "SCANWATCH_SNAPSHOT": str(work / "metrics.json")}
            sync = [str(bindir / "scanwatch"), "sync", "--quiet"]
            # The assets are partitioned by workspace: a schedule's run carries its partition as a tag, and
            # without a workspaces file the one partition is `default`.
            job = [str(bindir / "dagster"), "job", "execute", "-m", "pipelines.definitions", "-j", "refresh_job",
                   "--tags", json.dumps({"dagster/partition": "default"})]
            first, _ = _timed(sync, env)
            _timed(job, env)  # warm-up: file cache, .pyc files
            runs = {"scanwatch sync": [], "refresh_job run": []}
            for _ in range(repeats):  # interleaved, so that a busy spell of the host weighs on both
                runs["scanwatch sync"].append(_timed(sync, env))
                runs["refresh_job run"].append(_timed(job, env))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {k: round(statistics.median(w for w, _ in v), 2) for k, v in runs.items()}
    cpu = {k: round(statistics.median(c for _, c in v), 2) for k, v in runs.items()}
    return {"scale": scale, "first_sync_s": round(first, 2), "median_s": medians, "median_cpu_s": cpu,
            "runs_s": {k: [round(w, 2) for w, _ in v] for k, v in runs.items()},
            "ratio": round(medians["refresh_job run"] / medians["scanwatch sync"], 2),
            "cpu_ratio": round(cpu["refresh_job run"] / cpu["scanwatch sync"], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", default="small")
    args = parser.parse_args(argv)
    result = measure(args.repeats, args.scale)
    for name, seconds in result["median_s"].items():
        print(f"{name:<18} {seconds:>6.2f} s wall, {result['median_cpu_s'][name]:>6.2f} s CPU  "
              f"(wall runs: {result['runs_s'][name]})")
    print(f"refresh run / sync  {result['ratio']:.2f} x wall, {result['cpu_ratio']:.2f} x CPU  (goal <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
