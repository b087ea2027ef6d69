"""The scale curve: what a sync costs at about 4k, 40k and 400k issues, for sizing a deployment.

`make bench-scale` (or `.venv/bin/python -m benchmarks.scale [--sizes medium,large,xlarge]`). Each size is a
simulator world (seed 7) in its own process with the rate limit raised out of the way, so that scanwatch
itself is measured. Per size: a first sync and an unchanged re-sync, each in its own process doing what
`scanwatch sync` does (wall time, requests the service counted, peak RSS from the child's own `VmHWM`);
the DuckDB file's size; the issue merge's seconds (the `issues` asset's `merge_seconds`); the snapshot
build's seconds (timed on the synced history); and the exporter's scrape p99 and series count on that
snapshot. Then one first sync of the 40k world at the real limit (120 a minute) against the floor the limit
sets: requests / 120 minutes (the 4k world's 89 requests fit in one window's budget and never meet the limit).

Prints a table, writes `benchmarks/results/scale.json` and, with matplotlib (`pip install -e '.[bench]'`),
the chart `docs/scale.png`. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CHART = ROOT / "docs" / "scale.png"  # beside docs/benchmarks.md, the benchmarks' README
SIZES = ("medium", "large", "xlarge")
RAISED = 1_000_000  # requests a window: the limit never binds


def _child() -> int:
    """One sync in this process, as `scanwatch sync` runs it; prints its per-asset metadata as JSON."""
    from pipelines.commands.materialize import materialize_all

    outcome = materialize_all(console_level="CRITICAL")
    print(json.dumps({"success": outcome.success, "metadata": outcome.metadata,
                      "error": None if outcome.success else f"{outcome.failed_step}: {outcome.error}"},
                     default=str))
    return 0 if outcome.success else 1


def _cpu_of_children() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _sync(sim, env: dict[str, str]) -> dict:
    from benchmarks.syncing import measured_child

    before, cpu = sim.request_count(), _cpu_of_children()
    code, seconds, rss, out = measured_child([sys.executable, "-m", "benchmarks.scale", "--child"], env=env,
                                             timeout=7200)
    cpu = _cpu_of_children() - cpu  # the sync's own CPU seconds (the simulator is not reaped meanwhile)
    body = json.loads(out.strip().splitlines()[-1]) if code == 0 else {"success": False, "metadata": {}}
    if not body["success"]:
        raise RuntimeError(f"sync failed: {out[-1500:]}")
    issues = body["metadata"].get("issues", {})
    return {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "requests": sim.request_count() - before,
            "peak_rss_mib": round(rss, 1),
            "merge_seconds": issues.get("merge_seconds"), "issues_read": issues.get("issues_read")}


def _snapshot_seconds(db: Path, snapshot: Path) -> float:
    from pipelines.storage import connect
    from pipelines.storage.workspaces import current_workspace
    from pipelines.sync.snapshot import refresh_snapshot

    conn = connect(db)
    try:
        started = time.perf_counter()  # the one workspace's part, as its run rebuilds it
        refresh_snapshot(conn, workspace_id=current_workspace(conn, None), label=None, path=snapshot)
        return round(time.perf_counter() - started, 2)
    finally:
        conn.close()


def _count_issues(db: Path) -> int:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute("SELECT count(*) FROM issues").fetchall()[0][0]


def _scrapes(snapshot: Path, n: int = 200) -> dict:
    import subprocess

    from benchmarks.scrape import _free_port, _percentiles, _scrape, first_answer
    from pipelines.core.processes import stop_process

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--port", str(port)],
                            env={**os.environ, "SCANWATCH_SNAPSHOT": str(snapshot)}, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _, series = first_answer(port, proc, timeout=60)
        p99 = _percentiles([_scrape(port)[0] for _ in range(n)])["p99_ms"]
    finally:
        stop_process(proc)
    return {"scrape_p99_ms": round(p99, 1), "series": series}


def measure_size(scale: str, work: Path, *, rate_limit: int = RAISED) -> dict:
    from benchmarks.sim import SimProcess

    folder = work / scale
    folder.mkdir(parents=True, exist_ok=True)
    db, snapshot = folder / "history.duckdb", folder / "metrics.json"
    started = time.perf_counter()
    with SimProcess(scale=scale, rate_limit=rate_limit) as sim:
        world_s = time.perf_counter() - started
        env = {**sim.env(str(db)), "SCANWATCH_SNAPSHOT": str(snapshot)}
        first = _sync(sim, env)
        resync = _sync(sim, env) if rate_limit == RAISED else None
    row = {"scale": scale, "issues": _count_issues(db), "world_build_s": round(world_s, 1), "first": first,
           "resync": resync, "db_mib": round(db.stat().st_size / 2**20, 1)}
    if rate_limit == RAISED:
        row["snapshot_seconds"] = _snapshot_seconds(db, snapshot)
        row.update(_scrapes(snapshot))
    else:
        row["floor_seconds"] = round(first["requests"] / rate_limit * 60, 1)
    return row


def _print(rows: list[dict], limited: dict | None) -> None:
    head = ("issues", "first sync (cpu)", "requests", "re-sync (cpu)", "req", "peak RSS", "DB", "merge",
            "merge re", "snapshot", "scrape p99", "series")
    print(" | ".join(head))
    for r in rows:
        f, s = r["first"], r["resync"]
        print(" | ".join(str(x) for x in (
            f"{r['issues']:,}", f"{f['seconds']} s ({f.get('cpu_seconds', '-')} s)", f["requests"],
            f"{s['seconds']} s ({s.get('cpu_seconds', '-')} s)", s["requests"],
            f"{max(f['peak_rss_mib'], s['peak_rss_mib'])} MiB", f"{r['db_mib']} MiB", f"{f['merge_seconds']} s",
            f"{s['merge_seconds']} s", f"{r['snapshot_seconds']} s", f"{r['scrape_p99_ms']} ms", r["series"])))
    if len(rows) >= 2:
        small, big = rows[-2], rows[-1]
        print(f"peak RSS {big['issues']:,} / {small['issues']:,} issues: "
              f"{big['first']['peak_rss_mib'] / small['first']['peak_rss_mib']:.2f} x")
    if limited:
        f = limited["first"]
        print(f"rate-limited first sync ({limited['issues']:,} issues, 120 a minute): {f['seconds']} s for "
              f"{f['requests']} requests; floor {limited['floor_seconds']} s "
              f"({f['seconds'] / limited['floor_seconds']:.2f} x)")


def chart(rows: list[dict], path: Path = CHART) -> Path | None:
    """Four panels against the issue count (log-log): wall time, peak RSS, DB size, merge and snapshot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install -e '.[bench]'): no chart")
        return None
    x = [r["issues"] for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), constrained_layout=True)
    panels = (
        ("sync seconds", {"first sync, wall": [r["first"]["seconds"] for r in rows],
                          "first sync, CPU": [r["first"].get("cpu_seconds") for r in rows],
                          "unchanged re-sync, wall": [r["resync"]["seconds"] for r in rows]}),
        ("peak RSS (MiB)", {"first sync": [r["first"]["peak_rss_mib"] for r in rows],
                            "re-sync": [r["resync"]["peak_rss_mib"] for r in rows]}),
        ("DuckDB file (MiB)", {"history": [r["db_mib"] for r in rows]}),
        ("seconds", {"issue merge, first": [r["first"]["merge_seconds"] for r in rows],
                     "snapshot build": [r["snapshot_seconds"] for r in rows]}),
    )
    for ax, (title, series) in zip(axes.flat, panels, strict=True):
        for label, ys in series.items():
            points = [(a, b) for a, b in zip(x, ys, strict=True) if b]  # a figure an older run lacks is left out
            ax.plot([a for a, _ in points], [b for _, b in points], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("issues in the history")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("scanwatch sync at scale (simulator, rate limit raised)")
    fig.savefig(path, dpi=90)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help="simulator scales, smallest first")
    parser.add_argument("--limited", default="large", help="scale of the rate-limited first sync ('' = none)")
    parser.add_argument("--from-json", type=Path, help="print the table and draw the chart of a saved result")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child()
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        rows = sorted(saved["sizes"], key=lambda r: r["issues"])
        _print(rows, saved.get("rate_limited"))
        chart(rows)
        return 0
    work = Path(tempfile.mkdtemp(prefix="scanwatch-scale-"))
    try:
        rows = []
        for scale in args.sizes.split(","):
            rows.append(measure_size(scale, work))
            print(json.dumps(rows[-1]), flush=True)
        limited = measure_size(args.limited, work / "limited", rate_limit=120) if args.limited else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows.sort(key=lambda r: r["issues"])
    _print(rows, limited)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps({"sizes": rows, "rate_limited": limited}, indent=2))
    if len(rows) > 1 and (path := chart(rows)):
        print(f"chart: {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
