"""Many writers on one PostgreSQL history, each in a process of its own as run pods on different nodes: syncs of
different workspaces write at once (no Python lock, no pool), and two syncs of one workspace take turns on
the workspace's lock row and leave the history one sync would. "The history" is the whole of it, every
table and column the catalog lists (tests/history_dump.py), against syncs run one at a time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.backends import rows
from tests.history_dump import SNAPSHOT_TABLES, diff, dump_history
from tests.ingest.conftest import Oracle

ROOT = Path(__file__).resolve().parents[2]
NAMES = {"acme": "pro", "beta": "pro_2"}


@pytest.fixture(scope="module")
def sim() -> Iterator:
    with serve_simulator(SimConfig(seed=17, scale="small", clock="driven", control=True, rate_limit=100000,
                                   pro_workspaces=2)) as s:
        yield s


def _env(sim, db: str, tmp: Path) -> dict[str, str]:
    file = tmp / "workspaces.yml"
    file.write_text("workspaces:\n" + "".join(f"  - name: {n}\n    api_key_env: KEY_{n.upper()}\n" for n in NAMES))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env.update({"SCANWATCH_WORKSPACES_FILE": str(file), "SCANWATCH_BASE_URL": sim.base_url, "SCANWATCH_DB": db,
                "PYTHONPATH": str(ROOT), **{f"KEY_{n.upper()}": sim.keys[k] for n, k in NAMES.items()}})
    return env


def _worker(env: dict[str, str], workspace: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.postgres.sync_worker", workspace, *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _paused(env: dict[str, str], workspace: str, release: Path) -> subprocess.Popen[str]:
    """A sync of `workspace` held inside its issues merge: transaction open, workspace's turn held."""
    proc = _worker(env, workspace, "--pause-at", "merge.before_commit:4", "--release", str(release))
    deadline = time.monotonic() + 180
    while not Path(f"{release}.paused").exists():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the sync never reached its issues merge"
        time.sleep(0.1)
    return proc


def _done(proc: subprocess.Popen[str], timeout: float = 240) -> None:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]


def _open_writers(db: str) -> int:
    """scanwatch connections of this database inside a transaction that has written."""
    return rows(db, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = 'scanwatch' AND backend_xid IS NOT NULL")[0][0]


def _same_history(got: str, want: str) -> None:
    problems = diff(dump_history(got), dump_history(want), ignore=SNAPSHOT_TABLES)
    assert not problems, problems


def test_syncs_of_different_workspaces_from_different_processes_write_at_once(sim, pg_server, pg_database,
                                                                              tmp_path):
    env = _env(sim, pg_database, tmp_path)
    release = tmp_path / "release-acme"
    held = _paused(env, "acme", release)
    try:
        assert _open_writers(pg_database) == 1  # acme's issues merge: written, not committed
        _done(_worker(env, "beta"))  # while acme's write transaction stays open: beta did not wait for it
        assert _open_writers(pg_database) == 1
    finally:
        release.write_text("go")
    _done(held)
    ids = dict(rows(pg_database, "SELECT workspace_label, workspace_id FROM accounts"))
    assert set(ids) == set(NAMES)
    for name, key in NAMES.items():
        truth = Oracle(sim.base_url, sim.keys[key]).state()
        stored = {r[0] for r in rows(pg_database, "SELECT id FROM issues WHERE workspace_id = ?", [ids[name]])}
        assert stored == {i["id"] for i in truth.all_issues()}, name
    # The whole history is that of the two syncs run one after the other.
    reference = pg_server.url(pg_server.create_database())
    for name in NAMES:
        _done(_worker(_env(sim, reference, tmp_path), name))
    _same_history(pg_database, reference)


def test_two_syncs_of_one_workspace_take_turns_and_leave_the_history_one_sync_would(sim, pg_server, pg_database,
                                                                                    tmp_path):
    env = _env(sim, pg_database, tmp_path)
    release = tmp_path / "release-first"
    first = _paused(env, "acme", release)
    try:
        second = _worker(env, "acme")
        deadline = time.monotonic() + 120
        # The second sync's first merge waits for the workspace's turn: the first merge's lock on the workspace's
        # row, a lock request the server has not granted.
        while not rows(pg_database, "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                                    "WHERE l.locktype IN ('transactionid', 'tuple') AND NOT l.granted "
                                    "AND a.application_name = 'scanwatch' "
                                    "AND a.query LIKE '%scanwatch_workspace_locks%'")[0][0]:
            assert second.poll() is None, second.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the second sync never waited for the first"
            time.sleep(0.1)
    finally:
        release.write_text("go")
    _done(first)
    _done(second)
    reference = pg_server.url(pg_server.create_database())
    _done(_worker(_env(sim, reference, tmp_path), "acme"))
    _same_history(pg_database, reference)
    assert rows(pg_database, "SELECT count(*) - count(DISTINCT id) FROM issues")[0][0] == 0


def test_once_the_workspace_row_exists_a_second_sync_still_waits_for_the_workspace_s_turn(sim, pg_server,
                                                                                         pg_database, tmp_path):
    """The turn is the lock on the workspace's row (storage/workspace_lock.sql), not the wait of a first insert:
    once an earlier sync has committed the row, a sync of the workspace holding its merge still makes the next
    one wait at its first merge, on that row."""
    env = _env(sim, pg_database, tmp_path)
    _done(_worker(env, "acme"))  # the workspace's row is there, committed
    assert rows(pg_database, "SELECT count(*) FROM scanwatch_workspace_locks WHERE workspace_key <> ''")[0][0] == 1
    sim.run_round()
    release = tmp_path / "release-first"
    first = _paused(env, "acme", release)
    try:
        second = _worker(env, "acme")
        deadline = time.monotonic() + 90
        while not rows(pg_database, "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                                    "WHERE l.locktype IN ('transactionid', 'tuple') AND NOT l.granted "
                                    "AND a.application_name = 'scanwatch' "
                                    "AND a.query LIKE '%scanwatch_workspace_locks%FOR UPDATE%'")[0][0]:
            assert second.poll() is None, "the second sync ran on while the first held the workspace's turn"
            assert time.monotonic() < deadline, "the second sync never waited on the workspace's row"
            time.sleep(0.1)
    finally:
        release.write_text("go")
    _done(first)
    _done(second)
    assert rows(pg_database, "SELECT count(*) - count(DISTINCT id) FROM issues")[0][0] == 0
