"""Figure 6: start-up cost of the code location and of the CLI, each in a fresh interpreter.

Both are paid by every `scanwatch sync` and every Dagster code-server start, so they are reported (median
of a few runs) to keep heavy imports out of the hot path.
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


def _time(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(repeats: int = 5) -> list[Figure]:
    out = []
    for key, (title, cmd) in COMMANDS.items():
        _time(cmd)  # warm the file cache and the .pyc files; a first run measures the disk, not the code
        runs = [_time(cmd) for _ in range(repeats)]
        out.append(Figure(key, f"start-up of {title}", round(statistics.median(runs), 3), "s", "reported", "info",
                          {"runs": [round(r, 3) for r in runs]}))
    return out
