"""The scan sensor's look at the queued scans of a DuckDB history a run is writing: it waits for the run's
step to let go of the file, within its budget, instead of skipping the tick (and with it a minute in which a
schedule's run may settle the finished scan before the sensor ever sees it)."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime

from pipelines.resources import HistoryResource
from pipelines.sensors import _pending
from pipelines.storage import connect, merge_account

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACCOUNT = {"workspace": {"id": "ws", "name": "Acme"}, "plan": "pro", "api_access": {"allowed": True},
           "quotas": {}, "projects": {"limit": 10, "used": 0, "paused": 0}}
HOLD = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(1.5)"


def _held(path: str) -> subprocess.Popen[str]:
    """Another process holding the file read-write for 1.5 s, as a run's step does."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, path], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_file_held_by_a_writer_is_waited_for_within_the_budget_and_not_past_it(tmp_path):
    """Mutation that fails it: `_pending` giving up at the first lock error (the first assertion)."""
    path = str(tmp_path / "h.duckdb")
    conn = connect(path)
    try:
        merge_account(conn, ACCOUNT, now=NOW)
    finally:
        conn.close()
    history = HistoryResource(database=path)

    proc = _held(path)
    try:
        started = time.monotonic()
        assert _pending(history, None, time.time() + 10, busy=False) == ([], [])  # read once the writer let go
        assert time.monotonic() - started > 0.5
    finally:
        proc.wait(10)

    proc = _held(path)
    try:  # no time left in the budget: one line, and the next tick tries again
        assert "not readable now (a run is writing it)" in _pending(history, None, time.time(), busy=False)
    finally:
        proc.wait(10)
