"""Figure 6: start-up cost of the code location, of the CLI and of the exporter, each in a fresh interpreter.

The first two are paid by every `scanwatch sync` and every Dagster code-server start, the last by every
exporter (re)start, so they are reported (median of a few runs) to keep heavy imports out of the hot path.
Beside them, a whole `scanwatch sync` of an unchanged small world (2 requests: nearly all of it is start-up
and Dagster's run machinery), wall and CPU seconds. `python -m benchmarks.startup` prints them alone.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from benchmarks.figures import Figure

COMMANDS = {
    "startup_import_definitions": ("`import pipelines.definitions`",
                                   [sys.executable, "-c", "import pipelines.definitions"]),
    "startup_sync_help": ("`scanwatch sync --help`", [sys.executable, "-m", "pipelines.cli", "sync", "--help"]),
    "startup_cli_help": ("`scanwatch --help` (no Dagster)", [sys.executable, "-m", "pipelines.cli", "--help"]),
}


def _time(cmd: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _cpu(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """CPU seconds (user + system) of the command: what it costs, however busy the host is."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _exporter_start() -> float:
    """From launch to the first answer on /metrics (no snapshot yet: the exporter answers all the same)."""
    import http.client
    import os
    import tempfile
    from pathlib import Path

    from benchmarks.scrape import _free_port
    from pipelines.core.processes import stop_process

    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="scanwatch-startup-") as tmp:
        env = {**os.environ, "SCANWATCH_SNAPSHOT": str(Path(tmp) / "metrics.json")}
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address", "127.0.0.1",
                                 "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    conn.request("GET", "/metrics")
                    conn.getresponse().read()
                    conn.close()
                    return time.perf_counter() - started
                except OSError:
                    if proc.poll() is not None or time.perf_counter() - started > 60:
                        raise RuntimeError("the exporter did not start") from None
                    time.sleep(0.01)
        finally:
            stop_process(proc)


def _unchanged_resync(repeats: int) -> Figure:
    """`scanwatch sync --quiet` of the small world already synced once, each in a fresh process."""
    import os
    import tempfile
    from pathlib import Path

    from benchmarks.sim import SimProcess

    with tempfile.TemporaryDirectory(prefix="scanwatch-startup-") as tmp, SimProcess(rate_limit=1_000_000) as sim:
        env = {**os.environ, **sim.env(str(Path(tmp) / "history.duckdb")),
               "SCANWATCH_SNAPSHOT": str(Path(tmp) / "metrics.json")}
        env.pop("DAGSTER_HOME", None)
        cmd = [sys.executable, "-m", "pipelines.cli", "sync", "--quiet"]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls, cpus, requests = [], [], []
        for _ in range(repeats):
            before = sim.request_count()
            walls.append(_time(cmd, env))
            requests.append(sim.request_count() - before)
            cpus.append(_cpu(cmd, env))
    return Figure("startup_sync_unchanged", "`scanwatch sync` of an unchanged workspace (small world)",
                  round(statistics.median(walls), 3), "s", "reported", "info",
                  {"runs": [round(r, 3) for r in walls], "cpu_seconds": round(statistics.median(cpus), 3),
                   "requests": max(requests)})


def measure(repeats: int = 5, *, sync: bool = False) -> list[Figure]:
    out = []
    for key, (title, cmd) in COMMANDS.items():
        _time(cmd)  # warm the file cache and the .pyc files; a first run measures the disk, not the code
        runs = [_time(cmd) for _ in range(repeats)]
        cpu = [_cpu(cmd) for _ in range(repeats)]
        out.append(Figure(key, f"start-up of {title}", round(statistics.median(runs), 3), "s", "reported", "info",
                          {"runs": [round(r, 3) for r in runs], "cpu_seconds": round(statistics.median(cpu), 3)}))
    _exporter_start()
    runs = [_exporter_start() for _ in range(repeats)]
    title = "start-up of `scanwatch exporter` to its first /metrics answer"
    out.append(Figure("startup_exporter", title, round(statistics.median(runs), 3), "s", "reported", "info",
                      {"runs": [round(r, 3) for r in runs]}))
    if sync:
        out.append(_unchanged_resync(repeats))
    return out


if __name__ == "__main__":
    for figure in measure(sync=True):
        cpu = figure.details.get("cpu_seconds")
        print(f"{figure.title:<64} {figure.value:>7} {figure.unit}" + (f"  cpu {cpu} s" if cpu is not None else "")
              + f"  runs {figure.details['runs']}")
