"""`python -m benchmarks.backfill [--quick]`: wall time and peak memory of the reconstruction and of the
Prometheus backfill (daily and hourly steps), on a history synced from the simulator's world.

Each figure is measured in a fresh child process, so its peak RSS (`VmHWM`) is its own; promtool and the
scratch Prometheus are separate processes whose largest peak is reported beside it. Timings are printed
and written to `benchmarks/results/`, never asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _vmhwm_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _child(kind: str, db: str, step: str | None) -> dict:
    """Runs in the measured child process."""
    from pipelines.storage.db import connect

    conn = connect(db)
    started = time.monotonic()
    if kind == "reconstruct":
        from pipelines.backfill.reconstruct import reconstruct

        conn.execute("DELETE FROM reconstructed_score_runs; DELETE FROM reconstructed_open_issue_runs; "
                     "DELETE FROM reconstruction_runs")
        started = time.monotonic()
        first = reconstruct(conn)
        first_s = time.monotonic() - started
        again = time.monotonic()
        second = reconstruct(conn)
        result = {"seconds": round(first_s, 2), "rerun_seconds": round(time.monotonic() - again, 2),
                  "score_rows": sum(r.score_rows for r in first),
                  "open_issue_rows": sum(r.open_issue_rows for r in first),
                  "rerun_changed": sum(r.rows_changed for r in second)}
    else:
        from pipelines.backfill.tsdb import Plan, backfill
        from pipelines.commands.backfill_prometheus import duration
        from pipelines.core.package_files import rule_files

        with tempfile.TemporaryDirectory() as tmp:
            plan = Plan(data_dir=Path(tmp) / "data", step=duration(step or "1d"),
                        labels={"job": "scanwatch", "instance": "localhost:9817"},
                        rule_files=[p for p in rule_files() if "record:" in p.read_text()])
            outcome = backfill(conn, plan)
            size = sum(f.stat().st_size for f in plan.data_dir.rglob("*") if f.is_file())
        result = {"seconds": round(time.monotonic() - started, 2), "samples": outcome.samples,
                  "rule_samples": outcome.rule_samples, "blocks": len(outcome.blocks),
                  "block_mb": round(size / 2**20, 1)}
    result["peak_mb"] = _vmhwm_mb()
    result["tools_peak_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return result


def _measure(kind: str, db: Path, step: str | None = None) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.backfill", "--child", kind, str(db),
                           *(["--step", step] if step else [])], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _sync(scale: str, db: Path) -> dict:
    import os

    from simulator.testing import SimConfig, serve_simulator

    with serve_simulator(SimConfig(seed=7, scale=scale, clock="driven", rate_limit=1_000_000)) as sim:
        env = dict(os.environ, SCANWATCH_BASE_URL=sim.base_url, SCANWATCH_API_KEY=sim.api_key, SCANWATCH_DB=str(db))
        env.pop("SCANWATCH_WORKSPACES_FILE", None)
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], env=env, check=True,
                       capture_output=True, text=True)
        return {"first_sync_seconds": round(time.monotonic() - started, 1)}


def run(quick: bool) -> dict:
    scale = "small" if quick else "large"
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "history.duckdb"
        out: dict = {"scale": scale, **_sync(scale, db)}
        out["reconstruct"] = _measure("reconstruct", db)
        out["prometheus_1d"] = _measure("prometheus", db, "1d")
        out["prometheus_1h"] = _measure("prometheus", db, "1h")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the small world instead of the large one")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "DB"), help=argparse.SUPPRESS)
    parser.add_argument("--step", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child[0], args.child[1], args.step)))
        return 0
    result = run(args.quick)
    result["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"backfill-{result['scale']}.json").write_text(json.dumps(result, indent=2) + "\n")
    r, d, h = result["reconstruct"], result["prometheus_1d"], result["prometheus_1h"]
    print(f"world {result['scale']}: first sync {result['first_sync_seconds']} s (reconstruction included)")
    print(f"reconstruction in DuckDB: {r['seconds']} s, peak RSS {r['peak_mb']} MB, {r['score_rows']} score rows, "
          f"{r['open_issue_rows']} open-issue rows; re-run {r['rerun_seconds']} s, {r['rerun_changed']} rows changed")
    for name, f in (("daily", d), ("hourly", h)):
        print(f"backfill-prometheus {name}: {f['seconds']} s, peak RSS {f['peak_mb']} MB (child tools, upper bound "
              f"{f['tools_peak_mb']} MB), {f['samples']} samples + {f['rule_samples']} rule samples, "
              f"{f['blocks']} blocks, {f['block_mb']} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
