"""Concurrency: scrapers against the exporter while syncs run, two syncs started at once, and `scanwatch
sql` racing a sync and trying to write.

The exporter reads only the snapshot file (DuckDB lets no other process open a file a writer holds), so
scrapes must never fail or see a lock; a second sync must wait for the first (or say why it will not);
`scanwatch sql` must refuse to change the history whatever the statement.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import duckdb
import httpx
import pytest

from pipelines.cli import main
from simulator.testing import SimConfig, serve_simulator
from tests.reliability.harness import (
    ROOT,
    assert_one_line,
    checked_sync,
    cli,
    diff,
    dump,
    service_env,
    sync_in_process,
)
from tests.service_truth import expected_events, mismatches, recorded_events, walk

LOCK_WORDS = re.compile(r"could not set lock|conflicting lock|database is locked|IO Error", re.IGNORECASE)


def _config(seed: int) -> SimConfig:
    return SimConfig(seed=seed, scale="small", clock="driven", control=True, rate_limit=100000)


def _start_exporter(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--port", "0",
                             "--listen-address", "127.0.0.1"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = proc.stdout.readline()
    found = re.search(r"(http://\S+/metrics)", line)
    assert found, line + (proc.stderr.read() if proc.poll() is not None else "")
    return proc, found.group(1).replace("localhost", "127.0.0.1")


READABLE = re.compile(r"^secscan_snapshot_readable\{workspace=\"[^\"]+\"\} 1\.0$", re.MULTILINE)
UNREADABLE = re.compile(r"^secscan_snapshot_readable(\{[^}]*\})? 0\.0$", re.MULTILINE)


def _scraper(url: str, stop: threading.Event, tally: Counter, lock: threading.Lock, errors: list[str]) -> None:
    with httpx.Client(timeout=10) as http:
        while not stop.wait(0.02):  # a scrape every ~20 ms per scraper: hard, without starving the syncs
            try:
                r = http.get(url)
                ok = r.status_code == 200 and READABLE.search(r.text) and not UNREADABLE.search(r.text) \
                    and "secscan_project_score{" in r.text
                problem = None if ok else f"{r.status_code} {r.text[:200]!r}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            with lock:
                tally["scrapes"] += 1
                if problem:
                    tally["failed"] += 1
                    errors.append(problem)


def _reader(env: dict[str, str], stop: threading.Event, tally: Counter, lock: threading.Lock,
            errors: list[str]) -> None:
    """`scanwatch sql` racing the syncs: served, or told in one line to come back (exit 75), nothing else."""
    while not stop.is_set():
        done = cli(["sql", "SELECT count(*) FROM issues"], env, timeout=60)
        with lock:
            tally["sql served" if done.returncode == 0 else "sql busy"] += 1
            if done.returncode not in (0, 75) or (done.returncode == 75 and (
                    "Traceback" in done.stderr or len(done.stderr.strip().splitlines()) != 1)):
                errors.append(f"scanwatch sql exit {done.returncode}: {done.stderr[-300:]}")


def scrape_while_syncing(tmp: Path, figures: Counter, *, scrapers: int, syncs: int, cli_syncs: bool) -> None:
    """Scrapers hammer a real exporter process while syncs replace the snapshot (the real CLI in the soak,
    in-process in CI to save Dagster's start-up; the exporter is another process either way)."""
    db = tmp / "history.duckdb"
    with serve_simulator(_config(41)) as sim:
        env = service_env(sim, db)
        truth = checked_sync(sim, db)  # a first snapshot to serve, from a history that holds the truth
        exporter, url = _start_exporter(env)
        stop, lock, tally, errors = threading.Event(), threading.Lock(), Counter(), []
        threads = [threading.Thread(target=_scraper, args=(url, stop, tally, lock, errors)) for _ in range(scrapers)]
        threads.append(threading.Thread(target=_reader, args=(env, stop, tally, lock, errors)))
        try:
            for t in threads:
                t.start()
            outputs, events = [], expected_events(None, truth)
            for _ in range(syncs):
                sim.run_round()
                if cli_syncs:
                    done = cli(["sync"], env)
                    outputs.append(done.stdout + done.stderr)
                    assert done.returncode == 0, done.stderr
                else:
                    outcome = sync_in_process(sim, db)
                    assert outcome.success, outcome.error
                truth, before = walk(sim.base_url, sim.api_key), truth
                events += expected_events(before, truth)
            with duckdb.connect(str(db), read_only=True) as conn:  # syncs under load still hold the truth
                assert mismatches(conn, truth) == []
                assert recorded_events(conn, truth.workspace_id) == events
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
            exporter.terminate()
            _, exporter_err = exporter.communicate(timeout=30)
    figures["concurrency: scrapes"] += tally["scrapes"]
    figures["concurrency: failed scrapes"] += tally["failed"]
    figures["concurrency: scanwatch sql during syncs, served"] += tally["sql served"]
    figures["concurrency: scanwatch sql during syncs, busy in one line"] += tally["sql busy"]
    figures["concurrency: syncs under scrapes"] += syncs
    assert tally["scrapes"] > scrapers * syncs and tally["sql served"] + tally["sql busy"] > 0, tally
    assert not errors, errors[:3]
    for text in [*outputs, exporter_err]:
        assert not LOCK_WORDS.search(text), text[-1000:]
        assert "Traceback" not in text, text[-2000:]


def test_scrapes_never_fail_while_syncs_run(tmp_path, figures):
    scrape_while_syncing(tmp_path, figures, scrapers=4, syncs=2, cli_syncs=False)


@pytest.mark.slow
def test_soak_scrapes_never_fail_while_syncs_run(tmp_path, figures):
    scrape_while_syncing(tmp_path, figures, scrapers=16, syncs=8, cli_syncs=True)


def test_two_syncs_started_at_once_both_finish_and_corrupt_nothing(tmp_path, figures):
    """The second sync waits for the history (each step waits for the lock) instead of failing; the result
    is the history of one clean sync: no doubled event, no lost row, a valid snapshot."""
    with serve_simulator(_config(43)) as ref_sim:
        checked_sync(ref_sim, tmp_path / "reference.duckdb")  # the reference holds what the service shows
    want = dump(tmp_path / "reference.duckdb")
    db = tmp_path / "history.duckdb"
    with serve_simulator(_config(43)) as sim:
        env = service_env(sim, db)
        procs = [subprocess.Popen([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    figures["concurrency: simultaneous syncs"] += 2
    for code, _out, err in results:
        if code != 0:  # allowed: a clear refusal, never a traceback or a lock dump
            assert_one_line(err, must_contain="scanwatch sync")
            figures["concurrency: simultaneous syncs refused in one line"] += 1
    assert any(code == 0 for code, _, _ in results), results
    assert diff(dump(db), want) == {}
    from pipelines.snapshot.format import read_snapshot

    read_snapshot(db.with_name("scanwatch-metrics.json"))


WRITES = [
    "DELETE FROM issues",
    "UPDATE issues SET status = 'fixed'",
    "INSERT INTO issue_events SELECT * FROM issue_events",
    "DROP TABLE issues",
    "TRUNCATE issues",
    "ALTER TABLE issues ADD COLUMN x INTEGER",
    "CREATE TABLE x AS SELECT 1",
    "CREATE VIEW v AS SELECT 1",
    "SELECT 1; DELETE FROM issues",
    "WITH gone AS (SELECT 1) DELETE FROM issues",
    "ATTACH 'other.duckdb' AS other",
    "COPY issues TO 'leak.csv'",
    "EXPORT DATABASE 'dumpdir'",
    "CHECKPOINT",
    "VACUUM",
    "SET lock_configuration = false",
    "SET enable_external_access = true",
    "PRAGMA enable_checkpoint_on_shutdown",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SELECT * FROM read_csv('/etc/passwd')",
    "CALL checkpoint()",
    "-- a comment only",
]


def test_scanwatch_sql_cannot_change_the_history(tmp_path, figures, capsys):
    db = tmp_path / "history.duckdb"
    with serve_simulator(_config(47)) as sim:
        assert sync_in_process(sim, db).success
        env = service_env(sim, db)
    before, digest = dump(db), hashlib.sha256(db.read_bytes()).hexdigest()
    refused = 0
    # The real command once as a process, then the same entry point in-process for the rest (CI time).
    done = cli(["sql", WRITES[0]], env)
    assert done.returncode != 0
    assert_one_line(done.stderr, must_contain="scanwatch sql")
    for statement in WRITES:
        code = main(["sql", "--db", str(db), statement])
        err = capsys.readouterr().err
        if code != 0:
            refused += 1
            assert_one_line(err, must_contain="scanwatch sql")
        figures["concurrency: write attempts through scanwatch sql"] += 1
    assert diff(dump(db), before) == {}
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert not (ROOT / "leak.csv").exists() and not (ROOT / "dumpdir").exists()
    assert not (Path.cwd() / "leak.csv").exists() and not (Path.cwd() / "dumpdir").exists()
    assert refused == len(WRITES), "a statement that is not a plain read was accepted"

