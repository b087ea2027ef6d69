"""Running scanwatch itself: one sync in-process (the figures that count requests per asset) or as the
`scanwatch sync` command in a child process (the figures that compare wall time and memory with peers)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.sim import SimProcess


@dataclass
class SyncRun:
    """What one sync cost: requests as scanwatch counted them and as the service counted them."""

    success: bool
    requests: int
    service_requests: int
    rate_limited: int
    seconds: float
    by_asset: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    max_rss_mb: float | None = None


@contextmanager
def _environ(values: dict[str, str]):
    saved = {k: os.environ.get(k) for k in [*values, "DAGSTER_HOME", "SCANWATCH_SNAPSHOT"]}
    os.environ.update(values)
    os.environ.pop("DAGSTER_HOME", None)  # an ephemeral Dagster instance: no run history left behind
    os.environ.pop("SCANWATCH_SNAPSHOT", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def sync_in_process(sim: SimProcess, db: str, *, full_reconcile: bool = False) -> SyncRun:
    """`materialize_all()`, the code `scanwatch sync` runs, so the per-asset request counts are at hand."""
    from pipelines.commands.materialize import materialize_all

    before = sim.request_count()
    with _environ(sim.env(db)):
        started = time.perf_counter()
        outcome = materialize_all(full_reconcile=full_reconcile)
        seconds = time.perf_counter() - started
    # Dagster's ephemeral instance holds SQLite connections that must be finalised in this thread; left to
    # the garbage collector they may be closed from a benchmark thread and print tracebacks.
    gc.collect()
    by_asset = {k: int(m.get("requests", 0)) for k, m in outcome.metadata.items() if "requests" in m}
    return SyncRun(
        success=outcome.success, requests=sum(by_asset.values()), service_requests=sim.request_count() - before,
        rate_limited=sum(int(m.get("rate_limited_429s", 0)) for m in outcome.metadata.values()),
        seconds=seconds, by_asset=by_asset, metadata=outcome.metadata,
        error=None if outcome.success else f"{outcome.failed_step}: {outcome.error}",
    )


def measured_child(cmd: list[str], env: dict[str, str] | None = None,
                   timeout: float = 900, cwd: Path | None = None) -> tuple[int, float, float, str]:
    """Run a command; return (exit code, wall seconds, peak RSS in MB of this child alone, output tail).

    The peak is the child's own `VmHWM`, read from /proc every 20 ms while it runs. Not `ru_maxrss`: Linux
    carries the pre-exec high-water mark over exec, and a child forked (or vforked) from this benchmark,
    which holds hundreds of MB of world data, would report the benchmark's RSS instead of its own.
    """
    import tempfile

    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as out:
        full_env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "SCANWATCH_SNAPSHOT")}
        proc = subprocess.Popen(cmd, env={**full_env, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                                text=True, cwd=cwd)
        deadline = started + timeout
        peak_kb = 0
        while True:
            peak_kb = max(peak_kb, _hwm_kb(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        text = out.read()
    return proc.returncode, seconds, (peak_kb or usage.ru_maxrss) / 1024.0, text[-2000:]


def _hwm_kb(pid: int) -> int:
    """The process's peak resident set so far (0 when it is gone or /proc is not there)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return 0
    return 0


def sync_command(sim: SimProcess, db: str) -> SyncRun:
    """`scanwatch sync` as a user runs it: start-up, Dagster and all, in its own process."""
    before = sim.request_count()
    code, seconds, rss, out = measured_child([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"],
                                             env=sim.env(db))
    requests = sim.request_count() - before
    return SyncRun(success=code == 0, requests=requests, service_requests=requests,
                   rate_limited=_limited(out), seconds=seconds, max_rss_mb=rss,
                   error=None if code == 0 else (out.strip().splitlines() or [f"exit {code}"])[-1])


def _limited(out: str) -> int:
    for line in out.splitlines():
        if "rate-limited answers" in line:
            try:
                return int(line.rsplit(",", 1)[1].split()[0])
            except (IndexError, ValueError):
                return 0
    return 0
