"""`scanwatch sql` on a DuckDB history a sync is writing: it waits for the file, for a bounded time the user can
set (`--wait`), and exits 75 with one line only once that time is spent. Before, it was refused at once: 7 of
the 15 cookbook queries run during a demo exited 75 and worked on retry.

The writer is another process holding DuckDB's file lock, as a sync does: DuckDB locks the file per process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE TABLE IF NOT EXISTS t AS SELECT 42 AS answer")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


@pytest.fixture
def history(tmp_path: Path) -> Path:
    db = tmp_path / "history.duckdb"
    subprocess.run([sys.executable, "-c", HOLD, str(db), "0"], check=True, capture_output=True)
    return db


def _hold(db: Path, seconds: float) -> subprocess.Popen:
    writer = subprocess.Popen([sys.executable, "-c", HOLD, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "held"
    return writer


def _sql(db: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_")}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sql", "SELECT answer FROM t", "--format", "csv",
                           "--db", str(db), *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - started


def test_a_reader_waits_for_the_writer_and_is_served(history: Path) -> None:
    writer = _hold(history, 3)
    try:
        done, _ = _sql(history, "--wait", "30")
    finally:
        writer.wait(30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["answer", "42"]


def test_a_reader_gives_up_after_its_wait_with_one_line(history: Path) -> None:
    writer = _hold(history, 30)
    try:
        done, took = _sql(history, "--wait", "1.5")
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == 75, done.stderr
    assert took >= 1.5
    [line] = done.stderr.strip().splitlines()
    assert "a sync is writing the history" in line and "1.5 s" in line and "--wait" in line, line


def test_a_negative_wait_is_refused(history: Path) -> None:
    done, _ = _sql(history, "--wait", "-1")
    assert done.returncode == 1
    assert done.stderr.strip() == "scanwatch sql: --wait must be a number of seconds, 0 or more (got -1)"
