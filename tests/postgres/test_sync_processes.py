"""`scanwatch sync` of many workspaces on a PostgreSQL history runs them in several processes
(`SCANWATCH_SYNC_PROCESSES`, one per core by default from 16 workspaces), all taking the next workspace from
one queue: what a run per thread in one process did, each workspace synced once under its own id, a failing
one a line of its own, the summary naming the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from simulator.testing import SimConfig, serve_simulator
from tests.backends import rows
from tests.workspaces.pair import environment, sync_in_its_own_session

ROOT = Path(__file__).resolve().parents[2]


def _sync(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_workspaces_synced_by_several_processes_each_once_and_a_failure_alone(pg_server, tmp_path):
    db = pg_server.url(pg_server.create_database())
    with serve_simulator(SimConfig(seed=7, scale="small", rate_limit=100000, pro_workspaces=2)) as sim:
        env = {**environment(sim, tmp_path, db), "SCANWATCH_SYNC_PROCESSES": "2"}
        done, left = sync_in_its_own_session(env)
        assert done.returncode == 1, done.stderr  # initech's key is refused
        # Its processes, and the fork server they were forked from, are gone when it has exited.
        assert not left, left
        failed = [line for line in done.stderr.splitlines() if line.startswith("scanwatch sync:")]
        assert len(failed) == 1 and "workspace initech failed in account" in failed[0], done.stderr
        assert done.stdout.startswith("scanwatch sync: ok (acme, globex)"), done.stdout
        assert rows(db, "SELECT workspace_label, count(*) FROM accounts GROUP BY 1 ORDER BY 1") == [
            ("acme", 1), ("globex", 1)]
        assert rows(db, "SELECT count(DISTINCT workspace_id) FROM reconstruction_runs") == [(2,)]

        done = _sync({**env, "SCANWATCH_SYNC_PROCESSES": "0"})
        assert done.returncode == 2 and "SCANWATCH_SYNC_PROCESSES must be a whole number from 1" in done.stderr
