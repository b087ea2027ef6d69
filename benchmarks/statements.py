"""`python -m benchmarks.statements --workspaces 1000 --refresh 40`: where an unchanged workspace's CPU goes,
statement by statement, and which of it the other workspaces wait for.

A DuckDB file has one writer: while a workspace's step holds the writer's turn, the other workspaces of the
sync wait for it, and the turn was held about 90% of a thousand workspaces' refresh (docs/benchmarks.md,
"Where an unchanged workspace's CPU goes, statement by statement"). The cost does not grow with the history;
it is fixed per statement, a few milliseconds each. So the next change is told by which statements run, in
which step, in the turn or beside it, not by a sampling profile of the whole process.

One `scanwatch sync` of `--refresh` of the history's workspaces runs in this process, on a copy of the
history `benchmarks.refresh_ab` builds and keeps in `--cache`. Each statement's CPU is its thread's
(`time.thread_time()` around `Connection.execute`: DuckDB runs a query in the calling thread, `threads = 1`),
added to its step and to "held" (in the writer's turn) or "beside" (a read that lent its turn,
`beside_the_writer`). Printed: each step's CPU and statements a workspace, then the costliest statements
run in the turn. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.many_workspaces import RAISED, ROOT
from benchmarks.refresh_ab import built_history, refreshing
from benchmarks.sim import SimProcess

# Frames that name a step: a step's own work, the run's records and checks, the snapshot.
_STEP_FILES = ("/pipelines/sync/", "/pipelines/commands/workspace_run.py", "/pipelines/defs/assets/checks.py")


def _step(stack: list[traceback.FrameSummary]) -> str:
    for frame in reversed(stack):
        if frame.filename.endswith("/pipelines/sync/step.py"):
            continue
        if any(part in frame.filename for part in _STEP_FILES):
            return f"{Path(frame.filename).name}:{frame.name}"
    return "(other)"


def _statement(sql: object) -> str:
    """A statement as it is told apart: its file's first comment line, or its first words."""
    text = str(sql).strip()
    first = text.splitlines()[0] if text else ""
    return (first if first.startswith("--") else " ".join(text.split()))[:90]


@contextlib.contextmanager
def _counted() -> Iterator[dict[str, Counter[Any]]]:
    """Every statement of the process counted, by (held or beside, step) and by (step, statement)."""
    from pipelines.storage.destinations import base
    from pipelines.storage.destinations.impl.duckdb import factory

    beside = threading.local()
    lend = factory.beside_the_writer

    @contextlib.contextmanager
    def lent(path: str | Path) -> Iterator[bool]:
        with lend(path) as outcome:
            beside.on = outcome
            try:
                yield outcome
            finally:
                beside.on = False

    figures: dict[str, Counter[Any]] = {"cpu": Counter(), "calls": Counter(), "held": Counter(),
                                        "held_calls": Counter()}
    execute = base.Connection.execute

    def timed(self: Any, sql: Any, params: Any = None) -> Any:
        where = "beside" if getattr(beside, "on", False) else "held"
        step = _step(traceback.extract_stack()[:-1])
        started = time.thread_time()
        try:
            return execute(self, sql, params)
        finally:
            spent = time.thread_time() - started
            figures["cpu"][(where, step)] += spent
            figures["calls"][(where, step)] += 1
            if where == "held":
                figures["held"][(step, _statement(sql))] += spent
                figures["held_calls"][(step, _statement(sql))] += 1

    base.Connection.execute = timed  # type: ignore[method-assign]
    factory.beside_the_writer = lent  # type: ignore[assignment]  # the name the engine's read looks up
    try:
        yield figures
    finally:
        base.Connection.execute = execute  # type: ignore[method-assign]
        factory.beside_the_writer = lend


def measure(workspaces: int, refresh: int, cache: Path) -> dict[str, Any]:
    """One counted sync of `refresh` of `workspaces`: wall, CPU and requests a workspace, and the counters."""
    from pipelines.cli import main

    with SimProcess(scale="small", seed=7, rate_limit=RAISED, workspaces=workspaces) as sim, \
            tempfile.TemporaryDirectory(prefix="scanwatch-bench-statements-") as tmp:
        built = built_history(sim, workspaces, cache, ROOT)
        env = refreshing(sim, workspaces, refresh, built, Path(tmp))
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        requests = sim.request_count()
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        try:
            with _counted() as figures, contextlib.suppress(SystemExit):
                main(["sync", "--quiet"])
        finally:
            os.environ.clear()
            os.environ.update(saved)
        wall = time.perf_counter() - started
        used = resource.getrusage(resource.RUSAGE_SELF)
        return {"wall_per_workspace_s": wall / refresh,
                "cpu_per_workspace_s": (used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime) / refresh,
                "requests_per_workspace": (sim.request_count() - requests) / refresh,
                "statements_per_workspace": sum(figures["calls"].values()) / refresh, **figures}


def report(found: dict[str, Any], workspaces: int, refresh: int, top: int) -> str:
    lines = [f"unchanged refresh of {refresh} of {workspaces} DuckDB workspaces, in this process: "
             f"{found['wall_per_workspace_s']:.3f} s a workspace, {found['cpu_per_workspace_s']:.3f} CPU-s, "
             f"{found['statements_per_workspace']:.1f} statements, "
             f"{found['requests_per_workspace']:.1f} requests",
             "", "where | step | statements' CPU a workspace | statements a workspace", "--- | --- | --- | ---"]
    for (where, step), spent in found["cpu"].most_common():
        lines.append(f"{where} | {step} | {1000 * spent / refresh:.1f} ms | "
                     f"{found['calls'][(where, step)] / refresh:.1f}")
    lines += ["", f"the {top} costliest statements in the writer's turn", "",
              "CPU a workspace | runs a workspace | step | statement", "--- | --- | --- | ---"]
    for (step, statement), spent in found["held"].most_common(top):
        lines.append(f"{1000 * spent / refresh:.2f} ms | {found['held_calls'][(step, statement)] / refresh:.1f} | "
                     f"{step} | {statement.replace('|', '/')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=1000, help="workspaces the history holds")
    parser.add_argument("--refresh", type=int, default=40, help="workspaces refreshed, spread over the file")
    parser.add_argument("--top", type=int, default=25, help="statements listed")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "scanwatch-bench-ab",
                        help="where the history is kept between calls (benchmarks.refresh_ab's)")
    args = parser.parse_args(argv)
    print(report(measure(args.workspaces, args.refresh, args.cache), args.workspaces, args.refresh, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
