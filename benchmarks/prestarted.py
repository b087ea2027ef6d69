"""K syncs forked from one process that imported Dagster and scanwatch once, for `benchmarks.pg_writers
--prestarted`.

The writers benchmark stands K processes in for K run pods on different nodes. A pod pays its Python start-up
(about 2.5 CPU-seconds to import Dagster and the assets) on its own node's cores; K processes on one 2-core
host pay K of them on the same two cores, and the wall of K = 16 then measures the host running out of CPU,
not one workspace's sync waiting on another's. Forking the K syncs from one process that already imported
everything takes that start-up out of the shared clock, as separate nodes would, and leaves in it what K
writers really share: the database server, the service and the syncs' own work.

`python -m benchmarks.prestarted` imports, prints `ready`, then reads one JSON line: a list of
`[workspace, environment]`. It forks one child per entry, each with exactly that environment, running what
`benchmarks.engines --child` runs (the ingestion assets and the history checks of that workspace), and prints
one JSON line: for each child its exit code, its seconds from the fork, its CPU seconds (from `wait4`) and
the tail of its output.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path


def _preload() -> None:
    """Everything a run pod has imported by the time its run starts. Besides the code location, that is its
    instance's storage (SQLAlchemy and Alembic, about 1 CPU-second, imported when an instance is first built)
    and what Dagster and httpx import only at a run's first step or request. Left to the children, they cost
    each of them about 1 CPU-second on the clock (a medium first sync: 2.4 CPU-seconds, 1.4 without them)."""
    import dagster as dg
    import duckdb  # noqa: F401
    import h11  # noqa: F401
    import httpcore  # noqa: F401  (httpx's transport, at the first request)
    import httpx  # noqa: F401
    import psycopg  # noqa: F401

    import pipelines.defs.assets
    import pipelines.defs.checks
    import pipelines.defs.resources
    import pipelines.storage  # noqa: F401

    # The instance's storage stack (a pod loads its instance before the run), and the run machinery Dagster
    # imports at a run's first step: one run of an empty asset.
    with dg.DagsterInstance.ephemeral() as instance:
        dg.materialize([dg.asset(name="prestarted")(lambda: None)], instance=instance,
                       run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}})
    "scanwatch".encode("idna")  # httpx's host names


def _run_child(workspace: str, env: dict[str, str], log: Path) -> None:
    """In the forked child: its own environment and output, then the sync; never returns."""
    code = 1
    try:
        os.environ.clear()
        os.environ.update(env)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        from benchmarks.engines import _child

        code = _child(workspace)
    except BaseException as exc:  # a child reports its failure; it never returns into the fork loop
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> int:
    _preload()
    print("ready", flush=True)
    jobs = json.loads(sys.stdin.readline())
    folder = Path(tempfile.mkdtemp(prefix="bench-prestarted-"))
    started = time.perf_counter()
    children: dict[int, tuple[str, Path]] = {}
    for workspace, env in jobs:
        log = folder / f"{workspace}.log"
        pid = os.fork()
        if pid == 0:
            _run_child(workspace, env, log)
        children[pid] = (workspace, log)
    results = []
    while children:
        pid, status, usage = os.wait4(-1, 0)
        workspace, log = children.pop(pid)
        results.append({"workspace": workspace, "code": os.waitstatus_to_exitcode(status),
                        "seconds": time.perf_counter() - started, "cpu_seconds": usage.ru_utime + usage.ru_stime,
                        "output": log.read_text(errors="replace")[-500:]})
    print(json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
