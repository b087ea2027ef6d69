"""`python -m benchmarks.duckdb_peak [--workspaces 300] [--tree DIR] [--interval 0.1]`: where the peak RSS of a
DuckDB first sync of N small workspaces goes.

`benchmarks.many_workspaces` gives one figure per sync, its peak RSS. This one says what the process held at
that peak: `scanwatch sync` runs in a child process as users run it (a fresh history, the simulator's small
world in each of N workspaces, the rate limit out of the way), with a thread that samples every `--interval`
seconds the process's RSS, DuckDB's own memory by tag (`Attached.memory_by_tag()`: `duckdb_memory()` of the
process's one database), and the size of the history's write-ahead log (DuckDB empties or deletes it at a
checkpoint). Where DuckDB holds more than `--heavy` MiB of one tag, it also notes the scanwatch frames each
thread was in, so a peak is tied to the statement that made it. The sampler's own query runs beside the
sync's: a turn's end that lets go of DuckDB's cache meanwhile may keep it once. `--tree DIR` runs another
source tree's scanwatch (from dcac71c on, which has `memory_by_tag`).

Prints the peak (RSS, DuckDB's tags), the samples of highest RSS, the statements at DuckDB's heavy moments,
counted, and the number of checkpoints; writes `benchmarks/results/duckdb_peak.json` with every sample.
Figures are reported, never asserted.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
_OUT = "SCANWATCH_BENCH_PEAK_OUT"
_SETTINGS = "SCANWATCH_BENCH_PEAK_SETTINGS"  # interval,heavy_mib: read in the child


def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _frames() -> dict[str, list[str]]:
    """Each thread's innermost scanwatch frames, innermost last (no source lines read: the sampler must not
    grow the memory it measures)."""
    stacks = {}
    for ident, frame in sys._current_frames().items():
        summary = traceback.StackSummary.extract(traceback.walk_stack(frame), lookup_lines=False)
        ours = [f"{Path(f.filename).name}:{f.lineno}:{f.name}" for f in reversed(summary)
                if "/pipelines/" in f.filename]
        if ours:
            stacks[str(ident)] = ours[-5:]
    return stacks


def _sample_until(stop: threading.Event, out: Path, wal: Path, interval: float, heavy_kb: int,
                  memory: Callable[[], dict[str, tuple[int, int]]]) -> None:
    """One JSON line a sample, appended: nothing kept in the child, and the cost of a sample stays the same
    to the end of the sync. Stopped and joined before the child exits: a thread left inside a DuckDB call
    while the interpreter shuts down aborts the process."""
    started = time.monotonic()
    with out.open("a", encoding="utf-8") as fh:
        while not stop.wait(interval):
            row: dict[str, Any] = {"t": round(time.monotonic() - started, 2), "rss_kb": _rss_kb()}
            try:
                row["wal_kb"] = wal.stat().st_size // 1024
            except OSError:  # DuckDB deletes the log at a checkpoint
                row["wal_kb"] = -1
            try:
                row["tags_kb"] = {tag: [used // 1024, spilled // 1024] for tag, (used, spilled) in memory().items()}
            except Exception as exc:  # a sample lost is told in the sample; the sync goes on
                row["error"] = str(exc)[:200]
            if any(used > heavy_kb for used, _ in row.get("tags_kb", {}).values()):
                row["frames"] = _frames()
            fh.write(json.dumps(row) + "\n")
            fh.flush()


def child() -> int:
    """In the child: the sampler beside `scanwatch sync --quiet`. What it reads of the history's DuckDB is
    imported here, before the thread starts: a tree without it says so in one line and runs nothing."""
    interval, heavy = (float(v) for v in os.environ[_SETTINGS].split(","))
    wal = Path(os.environ["SCANWATCH_DB"] + ".wal")
    try:
        from pipelines.storage.destinations.impl.duckdb.sql_client import Attached

        memory = Attached.memory_by_tag
    except (ImportError, AttributeError) as exc:
        print(f"benchmarks.duckdb_peak: this tree cannot say what DuckDB holds ({exc}); use a tree from "
              "dcac71c on", file=sys.stderr)
        return 2
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_until, args=(stop, Path(os.environ[_OUT]), wal, interval,
                                                           int(heavy * 1024), memory))
    sampler.start()
    from pipelines.cli import main as cli

    try:
        return cli(["sync", "--quiet"])
    finally:
        stop.set()
        sampler.join()


def _samples(path: Path) -> list[dict[str, Any]]:
    """The child's samples; a last line cut short by its exit is left out."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return found


def _report(samples: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    def used(row: dict[str, Any]) -> int:
        return sum(u for u, _ in row.get("tags_kb", {}).values())

    top = sorted(samples, key=lambda r: -r["rss_kb"])[:8]
    statements: collections.Counter[str] = collections.Counter()
    for row in samples:
        tags = row.get("tags_kb") or {"-": [0, 0]}
        heavy = max(tags.items(), key=lambda kv: kv[1][0])[0]
        for frames in row.get("frames", {}).values():
            if frames and ("execute" in frames[-1] or "fetch" in frames[-1]):
                statements[f"{heavy}: " + " > ".join(frames[-3:])] += 1
    wal = [r["wal_kb"] for r in samples]
    return {
        "wall_s": round(run["seconds"], 1), "cpu_s": round(run["cpu"], 1), "code": run["code"],
        "peak_rss_mib": round(run["rss_mib"], 1), "samples": len(samples),
        "checkpoints": sum(1 for a, b in itertools.pairwise(wal) if a > 0 and b < a),  # smaller, or deleted
        "samples_lost": sum(1 for r in samples if "error" in r),
        "first_error": next((r["error"] for r in samples if "error" in r), None),
        "largest_wal_mib": round(max(wal, default=0) / 1024, 1),
        "duckdb_most_mib": round(max((used(r) for r in samples), default=0) / 1024, 1),
        "highest_rss": [{"t": r["t"], "rss_mib": r["rss_kb"] // 1024,
                         "duckdb_mib": {k: round(v[0] / 1024, 1) for k, v in r.get("tags_kb", {}).items()
                                        if v[0] >= 1024}} for r in top],
        "heavy_statements": statements.most_common(12),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=300)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose scanwatch runs the sync")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between samples")
    parser.add_argument("--heavy", type=float, default=25.0, help="MiB of one DuckDB tag that notes the frames")
    args = parser.parse_args(argv)
    from benchmarks.many_workspaces import RAISED, _environment, measured
    from benchmarks.sim import SimProcess

    tree = args.tree.resolve()
    with SimProcess(scale="small", seed=7, rate_limit=RAISED, workspaces=args.workspaces) as sim, \
            tempfile.TemporaryDirectory(prefix="scanwatch-bench-peak-") as tmp:
        out = Path(tmp) / "samples.ndjson"
        env = {**_environment(sim, args.workspaces, Path(tmp), str(Path(tmp) / "history.duckdb")),
               _OUT: str(out), _SETTINGS: f"{args.interval},{args.heavy}", "PYTHONPATH": str(tree)}
        # This file as a script, so that a tree from before it still runs it, with that tree's scanwatch.
        run = measured([sys.executable, __file__, "--child"], env, timeout=7200, cwd=tree)
        samples = _samples(out)
    figures = {"workspaces": args.workspaces, "tree": str(tree), **_report(samples, run)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "duckdb_peak.json").write_text(json.dumps({**figures, "every_sample": samples}))
    for key, value in figures.items():
        if isinstance(value, list):
            print(f"{key}:")
            for item in value:
                print(f"  {json.dumps(item)}")
        else:
            print(f"{key}: {value}")
    if run["code"] != 0:
        print(run["out"][-1500:], file=sys.stderr)
    return int(run["code"])


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        # Run as a script, this folder is first on the path, where `benchmarks/requests.py` would stand in for
        # the `requests` package.
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
        sys.exit(child())
    sys.exit(main())
