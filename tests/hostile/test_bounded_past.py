"""The rebuilt past never reaches before the service's own history (a year of scans, 30 days on Free),
whatever dates a record carries, on both engines (`engine_db`); and `backfill-prometheus` checks its arguments
and cleans up when stopped (its arguments and its scratch Prometheus are the command's own, whatever the
history is: those cases run on DuckDB)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.backfill import tsdb
from pipelines.backfill.reconstruct import reconstruct
from tests.backfill.handmade import DAY0, FIRST_SYNC, at, day, history
from tests.reliability.harness import ROOT, assert_one_line

YEAR_ONE = dt.datetime(1, 1, 1, tzinfo=dt.UTC)


def _ancient(path: Path | str, plan: str = "pro"):
    conn = history(path, projects=["p"], targets=[("t1", "p")],
                   scans=[("s0", "t1", dt.datetime(1900, 1, 1, tzinfo=dt.UTC), 10, "done"),
                          ("s1", "t1", at(-3, 5), 70, "done")],
                   issues=[("old", "p", "high", "open", YEAR_ONE, None),
                           ("gone", "p", "low", "fixed", YEAR_ONE, dt.datetime(1, 6, 1, tzinfo=dt.UTC)),
                           ("new", "p", "critical", "open", at(-2), None)])
    conn.execute("UPDATE accounts SET plan = ?", [plan])
    return conn


@pytest.mark.parametrize(("plan", "days"), [("pro", 366), ("solo", 366), ("free", 30)])
def test_an_issue_first_seen_in_year_one_rebuilds_only_the_services_history(engine_db, plan, days):
    conn = _ancient(engine_db, plan)
    try:
        _rebuilds_only_the_services_history(conn, days)
    finally:
        conn.close()


def _rebuilds_only_the_services_history(conn, days: int) -> None:
    [result] = reconstruct(conn, now=FIRST_SYNC)
    assert (result.first_day, result.last_day) == (day(-days), day(-1))
    assert result.open_issue_rows == days * 5  # one project, five severities, a row a day
    rows = dict(conn.execute("SELECT day, open_issues FROM reconstructed_open_issues WHERE severity = 'high'")
                .fetchall())
    assert rows[day(-days)] == 1  # open since year one: open on the first day rebuilt
    scores = dict(conn.execute("SELECT day, score FROM reconstructed_scores WHERE target_id = 't1'").fetchall())
    assert min(scores) == day(-days) and scores[day(-days)] == 10  # the 1900 scan's score holds from day one


def test_backfill_prometheus_writes_from_the_services_history_only(engine_db, tmp_path):
    conn = _ancient(engine_db)
    try:
        reconstruct(conn, now=FIRST_SYNC)
        outcome = tsdb.write_series(conn, tsdb.Plan(data_dir=tmp_path / "data"), tmp_path / "series.om")
    finally:
        conn.close()
    first = dt.datetime(DAY0.year, DAY0.month, DAY0.day, tzinfo=dt.UTC) - dt.timedelta(days=366)
    assert outcome.start is not None and first <= outcome.start <= first + dt.timedelta(days=1)
    assert outcome.samples <= 366 * 17  # a sample a day for each of its 17 series, not 740,000 days


def backfill(args: list[str], db: Path, **popen) -> subprocess.Popen | subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pipelines.cli", "backfill-prometheus", "--db", str(db), *args]
    if popen:
        return subprocess.Popen(command, cwd=ROOT, text=True, **popen)
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture
def small_db(tmp_path) -> Path:
    conn = _ancient(tmp_path / "h.duckdb")
    reconstruct(conn, now=FIRST_SYNC)
    conn.close()
    return tmp_path / "h.duckdb"


def _data_dirs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    file = tmp_path / "a-file"
    file.write_text("x")
    link = tmp_path / "a-link"
    link.symlink_to(tmp_path / "target-dir", target_is_directory=True)
    (tmp_path / "target-dir").mkdir()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    return {"file": (file, "is not a directory"), "symlink": (link, "is a symbolic link"),
            "foreign": (busy, "is not empty and not a Prometheus data directory"),
            "etc": (Path("/etc"), "is not empty and not a Prometheus data directory")}


@pytest.mark.parametrize("case", ["file", "symlink", "foreign", "etc"])
def test_a_data_dir_that_is_not_prometheus_own_is_refused_in_one_line(small_db, tmp_path, case):
    path, says = _data_dirs(tmp_path)[case]
    before = sorted(os.listdir(path)) if path.is_dir() else None
    done = backfill(["--data-dir", str(path), "--no-rules"], small_db)
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain=says)
    assert (sorted(os.listdir(path)) if path.is_dir() else None) == before


@pytest.mark.parametrize("step", ["999999999d", "1m", "30d", "0d"])
def test_a_step_out_of_bounds_is_one_line(small_db, tmp_path, step):
    done = backfill(["--data-dir", str(tmp_path / "data"), "--step", step], small_db)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "--step" in done.stderr


def test_a_label_name_must_match_whole(small_db, tmp_path):
    done = backfill(["--data-dir", str(tmp_path / "data"), "--label", "env\n=prod"], small_db)
    assert done.returncode == 2 and "is not NAME=VALUE" in done.stderr and "Traceback" not in done.stderr


def _scratch_prometheus(data_dir: Path) -> list[int]:
    """Pids of Prometheus processes serving a scratch copy beside `data_dir`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b".scanwatch-backfill-" in part and str(data_dir.parent).encode() in part for part in cmdline):
            found.append(int(pid))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_backfill_leaves_no_scratch_prometheus_and_no_spool(small_db, tmp_path, sig):
    from tests.prometheus.tools import require

    require("prometheus")
    require("promtool")
    data = tmp_path / "data"
    # The signal arrives while the scratch Prometheus serves the new blocks: the moment the report measured.
    done = subprocess.run([sys.executable, "-m", "tests.hostile.signal_at", "backfill.scratch_ready", str(int(sig)),
                           "backfill-prometheus", "--db", str(small_db), "--data-dir", str(data)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 128 + sig, done.stderr
    assert_one_line(done.stderr, must_contain="interrupted")
    deadline = time.monotonic() + 10
    while _scratch_prometheus(data):
        assert time.monotonic() < deadline, "the scratch Prometheus outlived its backfill"
        time.sleep(0.1)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".scanwatch-backfill-")]
    assert not data.exists() or not any(data.iterdir())  # nothing half-moved in
