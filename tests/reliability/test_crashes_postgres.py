"""Crashes on a PostgreSQL history: `scanwatch sync` SIGKILLed at named points of its merges (and at a random
moment), then the next sync ends in the history of a run that was never interrupted. A killed client's open
transaction is rolled back by the server, so nothing is ever half-merged.

As tests/reliability/test_crashes.py does on DuckDB: each case starts from the same history (one clean sync of
world SEED, copied with CREATE DATABASE ... TEMPLATE), advances the world by a round of scans and kills the
second sync; the reference is that second sync run cleanly.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.backends import differences, dump, failure, rows, sync_history
from tests.reliability.harness import ROOT

SEED = 29
# Passages count account, projects, scans, issues in that order (merges), and each staged non-empty list.
POINTS = [
    ("merge.before_commit", 4),  # issues and their events merged, not committed
    ("merge.after_commit", 4),  # the issues committed, the projects not yet marked as read
]
SOAK_POINTS = [("merge.before_commit", 2), ("merge.staged", 5), ("merge.staged", 1), ("merge.before_commit", 1),
               ("merge.after_commit", 1), ("merge.staged", 3),
               ("merge.before_commit", 3), ("merge.after_commit", 3), ("scans.paging", 3), ("scans.before_state", 1),
               ("issues.paging", 2), ("step.recorded", 4)]
CORE = {"accounts": "workspace_id", "projects": "id", "targets": "id", "scans": "id", "issues": "id",
        "issue_events": "issue_id, event", "scans_gone": "scan_id", "project_sync_state": "project_id"}


def _config() -> SimConfig:
    return SimConfig(seed=SEED, scale="small", clock="driven", control=True, rate_limit=100000)


def _env(sim, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env.update({"SCANWATCH_BASE_URL": sim.base_url, "SCANWATCH_API_KEY": sim.api_key, "SCANWATCH_DB": url,
                "PYTHONPATH": str(ROOT)})
    return env


def _sync(sim, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in _env(sim, url).items():
        monkeypatch.setenv(key, value)
    result = sync_history()
    assert result.success, failure(result)


@pytest.fixture(scope="module")
def base(pg_server) -> tuple[str, dict]:
    """(the database after one clean sync, the dump after a clean second sync over one round of scans)."""
    first = pg_server.create_database()
    with pytest.MonkeyPatch.context() as monkeypatch, serve_simulator(_config()) as sim:
        _sync(sim, pg_server.url(first), monkeypatch)
        second = pg_server.create_database(template=first)
        sim.run_round()
        _sync(sim, pg_server.url(second), monkeypatch)
    return first, dump(pg_server.url(second), CORE)


def _kill_and_recover(pg_server, base, monkeypatch, figures: Counter, kill_at: str | None = None,
                      delay: float | None = None) -> bool:
    """False when the sync ended before `delay`: nothing was killed, so nothing is claimed of it."""
    first, want = base
    work = pg_server.url(pg_server.create_database(template=first))
    with serve_simulator(_config()) as sim:
        sim.run_round()
        command = ["-m", "tests.reliability.kill_at", kill_at] if kill_at else ["-m", "pipelines.cli"]
        proc = subprocess.Popen([sys.executable, *command, "sync", "--quiet"], cwd=ROOT, env=_env(sim, work),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        if delay is not None:
            time.sleep(delay)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        if delay is not None and proc.returncode == 0:
            return False
        assert proc.returncode == -signal.SIGKILL, f"{kill_at or delay}: no kill (exit {proc.returncode}) {err}"
        figures["crashes (PostgreSQL): kills"] += 1
        # The server rolled the killed client's transaction back: no connection of it is left inside one.
        deadline = time.monotonic() + 30
        while rows(work, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                         "AND application_name = 'scanwatch'")[0][0]:
            assert time.monotonic() < deadline, "the killed sync's connection stayed open"
            time.sleep(0.1)
        _sync(sim, work, monkeypatch)
    problems = differences(dump(work, CORE), want)
    if problems:
        figures["crashes (PostgreSQL): inconsistencies"] += 1
    assert not problems, f"{kill_at or delay}: {problems}"
    return True


@pytest.mark.parametrize(("point", "nth"), POINTS)
def test_sigkill_at_a_named_point_of_a_merge_loses_nothing(pg_server, base, monkeypatch, figures, point, nth):
    _kill_and_recover(pg_server, base, monkeypatch, figures, kill_at=f"{point}:{nth}")


@pytest.mark.slow
@pytest.mark.parametrize(("point", "nth"), SOAK_POINTS)
def test_soak_sigkill_at_more_named_points(pg_server, base, monkeypatch, figures, point, nth):
    _kill_and_recover(pg_server, base, monkeypatch, figures, kill_at=f"{point}:{nth}")


@pytest.mark.slow
def test_soak_sigkill_at_random_moments(pg_server, base, monkeypatch, figures):
    """Moments from the process's start, so the imports are killed too. A sync that ends before its moment is
    run again with the moments drawn below that one; a kill that never lands fails the case."""
    rng = random.Random(int(time.time()))
    latest = 9.0
    for _ in range(int(os.environ.get("SCANWATCH_SOAK_KILLS", "10"))):
        for _attempt in range(6):
            delay = rng.uniform(0.2, latest)
            if _kill_and_recover(pg_server, base, monkeypatch, figures, delay=delay):
                break
            latest = delay * 0.8  # the sync is shorter than that on this host
        else:
            raise AssertionError(f"no sync was still running at the drawn moment in 6 tries (latest {latest:.1f} s)")
