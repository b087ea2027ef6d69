"""An unchanged re-sync, one source tree against another, alternated on the same history.

`python -m benchmarks.resync --checkout before=DIR --checkout after=DIR [--scale xlarge] [--engine postgres]
[--repeats 3]`. A change that aims at the unchanged re-sync is measured here: one world (seed 7, rate limit
out of the way) is synced once into a fresh history (a database on a scratch PostgreSQL 15 server,
tests/pg_server.py, or a DuckDB file), then re-synced with each source tree in turn, `repeats` rounds, so
the host's load falls on both alike. Each re-sync is the ingestion assets and the history checks in a child
process run from that tree (benchmarks/engines.py's child): its wall, its peak RSS and the issue merge's
seconds. For the "before" tree: `git archive <commit> | tar -x -C DIR` (the tree's own `.venv` is not needed:
this one's runs it).

Prints each re-sync and the medians; writes `benchmarks/results/resync.json`. Timings are reported, never
asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RAISED = 1_000_000


def _sync(sim, db: str, tree: Path) -> dict:
    from benchmarks.syncing import measured_child

    code, seconds, rss, out = measured_child([sys.executable, "-m", "benchmarks.engines", "--child"],
                                             env={**sim.env(db), "PYTHONPATH": str(tree)}, timeout=7200, cwd=tree)
    body = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"success": False}
    if code != 0 or not body.get("success"):
        raise RuntimeError(f"a sync with {tree} failed: {out[-2000:]}")
    return {"seconds": round(seconds, 2), "peak_rss_mib": round(rss, 1),
            "merge_seconds": body["metadata"].get("issues", {}).get("merge_seconds")}


def measure(trees: dict[str, Path], scale: str, engine: str, repeats: int) -> dict:
    from benchmarks.pg_writers import _load
    from benchmarks.sim import SimProcess
    from tests.pg_server import PgServer

    server = PgServer.start() if engine == "postgres" else None
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    try:
        db = server.url(server.create_database()) if server else str(Path(tempfile.mkdtemp()) / "history.duckdb")
        with SimProcess(scale=scale, rate_limit=RAISED) as sim:
            first = _sync(sim, db, next(iter(trees.values())))
            for n in range(repeats):
                for name, tree in trees.items():
                    row = {**_sync(sim, db, tree), "load": _load()}
                    runs[name].append(row)
                    print(f"[bench] round {n + 1}, {name}: {row}", file=sys.stderr, flush=True)
    finally:
        if server:
            server.stop()
    medians = {name: {key: round(statistics.median(r[key] for r in rows), 2)
                      for key in ("seconds", "merge_seconds", "peak_rss_mib")} for name, rows in runs.items()}
    return {"scale": scale, "engine": engine, "repeats": repeats, "first_sync": first, "median": medians,
            "runs": runs, "trees": {k: str(v) for k, v in trees.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", required=True, metavar="NAME=DIR",
                        help="a scanwatch source tree to measure, named (give two or more)")
    parser.add_argument("--scale", default="xlarge")
    parser.add_argument("--engine", choices=("postgres", "duckdb"), default="postgres")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    trees = {name: Path(path).resolve() for name, _, path in (c.partition("=") for c in args.checkout)}
    result = measure(trees, args.scale, args.engine, args.repeats)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "resync.json").write_text(json.dumps(result, indent=2))
    print(f"unchanged re-sync on {args.engine}, {args.scale} world, median of {args.repeats} (alternated)")
    print("tree | wall | issue merge | peak RSS")
    for name, m in result["median"].items():
        print(f"{name} | {m['seconds']} s | {m['merge_seconds']} s | {m['peak_rss_mib']} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
