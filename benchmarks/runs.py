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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.sim import SimProcess

ROOT = Path(__file__).resolve().parent.parent


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    import os

    started = time.perf_counter()
    proc = subprocess.run(cmd, env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    return time.perf_counter() - started


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
            job = [str(bindir / "dagster"), "job", "execute", "-m", "pipelines.definitions", "-j", "refresh_job"]
            first = _timed(sync, env)
            _timed(job, env)  # warm-up: file cache, .pyc files
            runs = {"scanwatch sync": [_timed(sync, env) for _ in range(repeats)],
                    "refresh_job run": [_timed(job, env) for _ in range(repeats)]}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {k: round(statistics.median(v), 2) for k, v in runs.items()}
    return {"scale": scale, "first_sync_s": round(first, 2), "median_s": medians,
            "runs_s": {k: [round(x, 2) for x in v] for k, v in runs.items()},
            "ratio": round(medians["refresh_job run"] / medians["scanwatch sync"], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", default="small")
    args = parser.parse_args(argv)
    result = measure(args.repeats, args.scale)
    for name, seconds in result["median_s"].items():
        print(f"{name:<18} {seconds:>6.2f} s  (runs: {result['runs_s'][name]})")
    print(f"refresh run / sync  {result['ratio']:.2f} x  (goal <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
