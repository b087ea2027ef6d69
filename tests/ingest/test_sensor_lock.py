"""The scan sensor's look at the queued scans of a DuckDB history a run is writing: it waits for the run's
step to let go of the file, within its budget, instead of skipping the tick (and with it a minute in which a
schedule's run may settle the finished scan before the sensor ever sees it)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

from pipelines.defs.resources import HistoryResource
from pipelines.defs.sensors import pending_in_history
from pipelines.storage import connect, merge_account
from pipelines.storage.destinations.impl.duckdb import errors as duckdb_engine

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACCOUNT = {"workspace": {"id": "ws", "name": "Acme"}, "plan": "pro", "api_access": {"allowed": True},
           "quotas": {}, "projects": {"limit": 10, "used": 0, "paused": 0}}
# Holds the file read-write, as a run's step does, until told to let go (a line on its stdin): no test here
# depends on how long anything takes.
HOLD = "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('held', flush=True); sys.stdin.readline()"


def _held(path: str) -> subprocess.Popen[str]:
    """Another process holding the file read-write until `_let_go`."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _let_go(proc: subprocess.Popen[str]) -> None:
    proc.stdin.write("go\n")
    proc.stdin.close()
    assert proc.wait(30) == 0


class _Waits:
    """The DuckDB engine's clock, telling when the reader met the writer's lock and went to wait for it."""

    def __init__(self) -> None:
        self.met_lock = threading.Event()
        self.monotonic = time.monotonic

    def sleep(self, seconds: float) -> None:
        self.met_lock.set()
        time.sleep(min(seconds, 0.05))


def test_a_file_held_by_a_writer_is_waited_for_within_the_budget_and_not_past_it(tmp_path, monkeypatch):
    """Mutation that fails it: `pending_in_history` giving up at the first lock error (the first assertion)."""
    path = str(tmp_path / "h.duckdb")
    conn = connect(path)
    try:
        merge_account(conn, ACCOUNT, now=NOW)
    finally:
        conn.close()
    history = HistoryResource(database=path)
    clock = _Waits()
    monkeypatch.setattr(duckdb_engine, "time", clock)

    proc = _held(path)
    looked: list[object] = []
    reading = threading.Thread(
        target=lambda: looked.append(pending_in_history(history, {"default": None}, time.time() + 60, busy=())))
    try:
        reading.start()
        while not clock.met_lock.wait(0.05):  # the reader met the writer's lock ...
            assert reading.is_alive(), f"the sensor gave up without waiting: {looked}"
        assert reading.is_alive() and not looked  # ... and waits for it rather than skip the tick
    finally:
        _let_go(proc)
    reading.join(60)
    assert looked == [{"default": ([], [])}]  # read once the writer let go

    proc = _held(path)
    try:  # no time left in the budget: one line, and the next tick tries again
        assert "not readable now (a run is writing it)" in pending_in_history(history, {"default": None}, time.time(),
                                                                          busy=())
    finally:
        _let_go(proc)
