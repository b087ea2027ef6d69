"""`scanwatch backup` and `scanwatch restore` on both engines: a backup taken while a writer holds the history
restores to a history equal to the original (tests/history_dump.py), and the restored history syncs on.

The writer holds the history as a sync's merge does, with a change of its own not yet committed when the
backup starts: on DuckDB it holds the file's lock (the backup waits for it, then copies the state the writer
committed); on PostgreSQL its transaction is open (pg_dump is not blocked, and copies the committed state,
without the writer's change).
"""

from __future__ import annotations

import time

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.backends import backend_of, holding_writer
from tests.history_dump import diff, dump_history
from tests.reliability.harness import ROOT, assert_one_line, cli, service_env

RENAME = "UPDATE projects SET name = name || ' (renamed)'"


@pytest.fixture(scope="module")
def sim():
    with serve_simulator(SimConfig(seed=17, scale="small", clock="driven", control=True, rate_limit=100000)) as s:
        yield s


def test_a_backup_taken_while_a_writer_holds_the_history_restores_to_an_equal_history(sim, new_history, tmp_path):
    db = new_history()
    env = service_env(sim, db, SCANWATCH_SNAPSHOT=str(tmp_path / "metrics"))
    assert cli(["sync", "--quiet"], env).returncode == 0
    before = dump_history(db)
    backup = tmp_path / "history.backup"

    waits = backend_of(db).backup_waits_for_writer
    with holding_writer(db, RENAME, seconds=3):
        started = time.monotonic()
        done = cli(["backup", str(backup)], env, timeout=120)
        took = time.monotonic() - started
    assert took >= 1.5 or not waits, took  # where the backup waits, it waited for the writer
    assert done.returncode == 0, done.stderr
    assert "scanwatch backup: " in done.stdout and "scanwatch restore" in done.stdout
    original = dump_history(db)
    # Where the backup waited, the writer committed before the copy began; else the copy is of what was committed.
    committed_at_backup = original if waits else before
    assert diff(original, before), "the writer changed nothing: the test would prove nothing"

    restored = new_history()
    into = {**env, "SCANWATCH_DB": restored}
    done = cli(["restore", str(backup)], into, timeout=120)
    assert done.returncode == 0, done.stderr
    assert diff(dump_history(restored), committed_at_backup) == {}

    # A restore never replaces a history unless told, and the restored history syncs on.
    again = cli(["restore", str(backup)], into, timeout=120)
    assert again.returncode == 2
    assert_one_line(again.stderr, must_contain="--replace")
    sim.run_round()
    assert cli(["sync", "--quiet"], into).returncode == 0


def test_a_backup_never_overwrites_a_file(sim, tmp_path):
    db = tmp_path / "history.duckdb"
    env = service_env(sim, db)
    assert cli(["sync", "--quiet"], env).returncode == 0
    taken = tmp_path / "taken"
    taken.write_text("keep me")
    done = cli(["backup", str(taken)], env)
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain="already exists")
    assert taken.read_text() == "keep me"
    assert ROOT.is_dir()


def test_a_backup_of_a_newer_scanwatch_is_refused_and_nothing_is_written(sim, tmp_path):
    """A backup whose schema is newer than this scanwatch's is never restored: this version would then write it."""
    import duckdb

    from pipelines.core.sqlfiles import read_sql
    from pipelines.storage.db import latest_version

    backup = tmp_path / "newer.duckdb"
    with duckdb.connect(str(backup)) as con:
        con.execute(read_sql("storage/schema_migrations.sql"))
        con.execute("INSERT INTO schema_migrations (version, name) VALUES (?, 'a newer scanwatch')",
                    [latest_version() + 1])
    db = tmp_path / "history.duckdb"
    done = cli(["restore", str(backup)], service_env(sim, db))
    assert done.returncode == 1, done.stderr
    assert_one_line(done.stderr, must_contain="newer than this scanwatch's")
    assert not db.exists() and not db.with_name(db.name + ".restoring").exists()
