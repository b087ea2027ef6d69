"""`python -m benchmarks.workspaces [--quick]`: a first sync of K rate-limited workspaces against one.

Each key has its own budget, so following K workspaces should take about as long as following one (goal:
at most 1.3x for 4). The simulator serves K independent Pro workspaces of the same shape; its rate limit
is compressed in time (the same 120 requests per window, a shorter window) so the limit, not Dagster's
start-up, is what a sync waits on. Each run is `scanwatch sync` in a child process on a fresh history.
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

from benchmarks.sim import SimProcess

ROOT = Path(__file__).resolve().parents[1]


def workspaces_environment(sim: SimProcess, count: int, folder: Path, db: str) -> dict[str, str]:
    """A clean environment following the simulator's first `count` workspaces through a workspaces file in
    `folder`, each key in a variable of its own, the history at `db`."""
    lines = ["workspaces:"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_") and k != "DAGSTER_HOME"}
    for n in range(count):
        lines += [f"  - name: ws{n + 1}", f"    api_key_env: BENCH_KEY_{n + 1}"]
        env[f"BENCH_KEY_{n + 1}"] = sim.keys[n]
    (folder / "workspaces.yml").write_text("\n".join(lines) + "\n")
    env.update({"SCANWATCH_WORKSPACES_FILE": str(folder / "workspaces.yml"), "SCANWATCH_BASE_URL": sim.base_url,
                "SCANWATCH_DB": db})
    return env


def first_sync(sim: SimProcess, count: int, folder: Path) -> dict:
    """Wall time and requests of one `scanwatch sync` of the first `count` workspaces, from nothing."""
    folder.mkdir(parents=True)
    env = workspaces_environment(sim, count, folder, str(folder / "history.duckdb"))
    before = sim.request_count()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"sync of {count} workspace(s) failed: {done.stderr.strip()[-500:]}")
    return {"workspaces": count, "seconds": round(seconds, 1), "requests": sim.request_count() - before,
            "summary": done.stdout.strip()}


def run(quick: bool = False, count: int = 4) -> dict:
    scale, limit, window = ("small", 4, 2.0) if quick else ("medium", 20, 5.0)
    with SimProcess(scale=scale, seed=7, rate_limit=limit, rate_window=window, workspaces=count) as sim, \
            tempfile.TemporaryDirectory(prefix="scanwatch-bench-ws-") as tmp:
        one = first_sync(sim, 1, Path(tmp) / "one")
        sim.advance(0)  # the rate-limit windows are wall time: let the first key's window roll over
        time.sleep(window)
        several = first_sync(sim, count, Path(tmp) / "several")
    ratio = several["seconds"] / one["seconds"]
    floor = one["requests"] / limit * window
    return {"benchmark": "workspaces", "quick": quick, "scale": scale,
            "rate_limit": f"{limit} per {window:g} s per key", "one": one, "several": several,
            "ratio": round(ratio, 2), "goal": "<= 1.3", "met": ratio <= 1.3,
            "floor_seconds_per_workspace": round(floor, 1)}


def replicate_workspaces(conn, count: int, source: str = "ws-1") -> None:
    """Copy one workspace's whole history `count - 1` times under new workspace ids, with every id column
    suffixed, so the snapshot and the exporter see `count` independent workspaces of the same size."""
    tables = conn.execute(
        "SELECT table_name, list(column_name ORDER BY ordinal_position), list(data_type ORDER BY ordinal_position) "
        "FROM information_schema.columns WHERE table_schema = 'main' AND table_name IN (SELECT table_name FROM "
        "information_schema.tables WHERE table_type = 'BASE TABLE') GROUP BY table_name "
        "HAVING list_contains(list(column_name), 'workspace_id')").fetchall()
    for k in range(2, count + 1):
        for table, columns, types in tables:
            values = []
            for column, kind in zip(columns, types, strict=True):
                if column == "workspace_id":
                    values.append(f"'ws-{k}'")
                elif column == "workspace_name":
                    values.append(f"'Workspace {k}'")
                elif kind == "VARCHAR" and (column == "id" or column.endswith("_id")):
                    values.append(f"\"{column}\" || '-{k}'")
                else:
                    values.append(f"\"{column}\"")
            conn.execute(f"INSERT INTO \"{table}\" SELECT {', '.join(values)} FROM \"{table}\" "
                         f"WHERE workspace_id = '{source}'")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small worlds, a short window")
    parser.add_argument("--workspaces", type=int, default=4)
    args = parser.parse_args(argv)
    result = run(args.quick, args.workspaces)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
