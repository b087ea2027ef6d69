"""`python -m benchmarks [--quick]`: every figure of the performance issue against the simulator.

Full mode measures the large world (about 14 minutes on 2 cores); `--quick` the small and medium worlds
with short windows (about 2 minutes) and is what the test suite runs. Timings are reported, never
asserted; request counts are deterministic for a seed and scale.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.figures import FAIL, Figure, judge

SECTIONS = ("requests", "merge", "startup", "pacing", "peers", "scrape")


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _scrape(quick: bool) -> list[Figure]:
    """The exporter engineer's scrape benchmark, when it is there: `benchmarks.scrape.run(quick) -> dict`.

    Its p99 under snapshot replacement (syncs writing) is the issue's figure (goal <= 50 ms); the rest is
    reported as it comes, so a new key in its result shows up without a change here.
    """
    try:
        from benchmarks import scrape  # type: ignore[attr-defined]
    except ImportError:
        return []
    result: Any = scrape.run(quick)
    if not isinstance(result, dict):
        return [Figure("scrape_result", "scrape benchmark result", str(result)[:80])]
    series = result.get("series")
    details = {k: v for k, v in result.items() if k not in ("benchmark", "quick")}
    figures = []
    under = result.get("under_writes") or {}
    rest = result.get("at_rest") or {}
    if "p99_ms" in under:
        p99 = float(under["p99_ms"])
        figures.append(Figure("scrape_p99_under_writes", f"exporter scrape p99 at {series} series, while syncs run",
                              round(p99, 1), "ms", "<= 50", judge(p99 <= 50), details))
    if "p99_ms" in rest:
        figures.append(Figure("scrape_p99_at_rest", f"exporter scrape p99 at {series} series, at rest",
                              round(float(rest["p99_ms"]), 1), "ms", "reported", "info",
                              {"median_ms": rest.get("median_ms")}))
    rss = result.get("exporter_rss_mib") or {}
    if "peak" in rss:
        figures.append(Figure("scrape_exporter_peak_rss", "exporter peak RSS", rss["peak"], "MiB", "reported",
                              "info", rss))
    if not figures:
        figures.append(Figure("scrape_result", "scrape benchmark (unrecognised result)", None, "", "reported",
                              "info", details))
    return figures


def run(quick: bool, only: tuple[str, ...] = SECTIONS, seed: int = 7) -> tuple[list[Figure], dict[str, Any]]:
    from benchmarks import merge, pacing, requests, startup
    from benchmarks.peers import side_by_side

    workdir = Path(tempfile.mkdtemp(prefix="scanwatch-bench-"))
    scale = "medium" if quick else "large"
    figures: list[Figure] = []
    timings: dict[str, float] = {}
    state: dict[str, Any] = {}

    def section(name: str, fn: Callable[[], list[Figure]]) -> None:
        if name not in only:
            return
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        try:
            got = fn()
        except Exception as exc:  # one broken section must not hide the others' figures
            traceback.print_exc()
            got = [Figure(f"{name}_error", f"{name}: the section failed", None, "", "runs", FAIL,
                          {"error": f"{type(exc).__name__}: {exc}"})]
        timings[name] = round(time.perf_counter() - started, 1)
        print(f"[bench] {name} done in {timings[name]} s", file=sys.stderr, flush=True)
        figures.extend(got)

    def do_requests() -> list[Figure]:
        out = requests.measure(scale, seed, workdir)
        state["rows"] = out.state.all_issues()
        state["workspace"] = out.state.projects[0].get("workspace_id") if out.state.projects else None
        return out.figures

    def do_merge() -> list[Figure]:
        rows = state.get("rows")
        if rows is None:
            from benchmarks.oracle import Oracle
            from benchmarks.sim import SimProcess

            with SimProcess(scale=scale, seed=seed, rate_limit=1_000_000) as sim:
                oracle = Oracle(sim.base_url, sim.api_key)
                rows = oracle.state().all_issues()
                oracle.close()
        return merge.measure(rows, "bench-workspace", workdir, repeats=1 if quick else 3)

    section("requests", do_requests)
    section("merge", do_merge)
    section("startup", lambda: startup.measure(2 if quick else 5))
    setup = pacing.PacingSetup("medium", 30, 2.0) if quick else pacing.PacingSetup("large", 120, 10.0)
    section("pacing", lambda: pacing.measure(setup, seed, workdir))
    section("peers", lambda: side_by_side.measure("small" if quick else "large", seed, 120,
                                                  2.0 if quick else 6.0, workdir))
    section("scrape", lambda: _scrape(quick))
    meta = {"mode": "quick" if quick else "full", "seed": seed, "scale": scale, "commit": _commit(),
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"), "python": platform.python_version(),
            "cpus": os.cpu_count(), "section_seconds": timings}
    return figures, meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small/medium worlds, short windows (~2 min)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}")
    parser.add_argument("--name", default=None, help="results file name (default: quick or full)")
    parser.add_argument("--seed", type=int, default=7, help="simulator world seed (default 7)")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    args = parser.parse_args(argv)
    only = tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    warnings.filterwarnings("ignore")  # Dagster's preview/deprecation warnings would bury the table
    figures, meta = run(args.quick, only, args.seed)
    path = report.write(args.name or meta["mode"], figures, meta)
    print(report.table(figures))
    if args.markdown:
        print()
        print(report.markdown(figures))
    print(f"\nfigures written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
