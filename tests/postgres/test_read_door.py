"""`scanwatch sql` and `pipelines.history` on a PostgreSQL history, as the docs' reader role (made by `scanwatch
roles`): one read statement in a READ ONLY transaction with a time limit, never waiting for a sync; every
write, file or server-side access and role change refused in one line, with nothing written; the URL's
password in no output. The boundary cases, role by role, are in test_door_boundary.py."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipelines.core import milestones
from pipelines.storage import connect
from pipelines.storage.read_only import ReadRefused, execute_read_only
from tests.backends import dump, rows
from tests.benchmarks.test_merge_unchanged import _issue
from tests.helpers import merge_issues
from tests.postgres.roles import reader_url

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


def scanwatch_sql(url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_")}
    env.update(SCANWATCH_DB=url, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "sql", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _filled(url: str) -> str:
    """A history holding 20 issues (a fifth of them fixed)."""
    conn = connect(url)
    try:
        merge_issues(conn, "ws", [_issue(n) for n in range(20)], now=NOW)
    finally:
        conn.close()
    return url


@pytest.fixture(scope="module")
def history_admin(pg_server) -> Iterator[str]:
    """One history for the module, as the superuser that built it: every test leaves it as it was (and most
    check that they did)."""
    name = pg_server.create_database()
    yield _filled(pg_server.url(name))
    pg_server.drop_database(name)


@pytest.fixture(scope="module")
def history(pg_server, history_admin) -> str:
    """The module's history as its readers read it: the reader role of `scanwatch roles`."""
    return reader_url(pg_server, history_admin)


def _password(url: str) -> str:
    return url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]


def test_a_read_returns_its_rows(history):
    done = scanwatch_sql(history, "SELECT severity, count(*) AS n FROM issues GROUP BY severity ORDER BY 1",
                         "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["severity,n", "critical,4", "high,4", "info,4", "low,4", "medium,4"]


def test_the_notebook_api_reads_the_same_door(history):
    from pipelines import history as notebook

    frame = notebook.query("SELECT count(*) AS n FROM issues WHERE status = 'open'", db=history)
    assert int(frame["n"][0]) == 15
    with pytest.raises(ValueError, match="read-only"):
        notebook.query("DELETE FROM issues", db=history)


@pytest.mark.parametrize("statement", [
    "INSERT INTO issues (workspace_id, id, project_id, target_id, first_observed_at, last_observed_at) "
    "VALUES ('w', 'x', 'p', 't', now(), now())",
    "UPDATE issues SET title = 'x'",
    "DELETE FROM issues",
    "DROP TABLE issues",
    "CREATE TABLE stolen AS SELECT * FROM issues",
    "TRUNCATE issues",
    "COPY issues TO PROGRAM 'touch {target}'",
    "COPY (SELECT 1) TO '{target}'",
    "COPY issues FROM PROGRAM 'id'",
    "SELECT pg_read_file('/etc/hostname')",
    "SELECT pg_catalog.pg_read_binary_file('/etc/hostname')",
    'SELECT "pg_read_file"(\'/etc/hostname\')',
    "SELECT lo_import('/etc/hostname')",
    "SELECT * FROM dblink('dbname=postgres', 'SELECT 1') AS t(x int)",
    "SELECT pg_ls_dir('.')",
    "SET ROLE pg_read_server_files",
    "SET SESSION AUTHORIZATION postgres",
    "RESET ROLE",
    "SELECT set_config('role', 'postgres', false)",
    "SELECT query_to_xml('DELETE FROM issues', true, false, '')",
    "SELECT pg_advisory_lock(1)",
    "DO $$ BEGIN DELETE FROM issues; END $$",
    "WITH gone AS (DELETE FROM issues RETURNING id) SELECT count(*) FROM gone",
    "SELECT * INTO stolen FROM issues",
    "SELECT * FROM issues FOR UPDATE",
    "EXPLAIN ANALYZE DELETE FROM issues",
    "EXPLAIN (ANALYZE, FORMAT json) UPDATE issues SET title = 'x'",
    "SELECT 1; DELETE FROM issues",
    "SELECT nextval('x')",
])
def test_a_write_or_server_side_access_is_refused_and_writes_nothing(history, tmp_path, statement):
    """The door scanwatch sql and pipelines.history share, called as they call it (their one-line output is
    checked below, through the command itself)."""
    target = tmp_path / "written-by-the-server"
    before = dump(history)
    with pytest.raises(ReadRefused) as refused:
        execute_read_only(history, statement.format(target=target))
    message = str(refused.value)
    assert refused.value.code == 1 and "\n" not in message
    assert dump(history) == before
    assert not target.exists()
    assert _password(history) not in message


@pytest.mark.parametrize("statement", ["DELETE FROM issues", "SELECT lo_import('/etc/hostname')",
                                       "WITH gone AS (DELETE FROM issues RETURNING id) SELECT count(*) FROM gone"])
def test_the_command_says_a_refusal_in_one_line(history, statement):
    before = dump(history)
    done = scanwatch_sql(history, statement)
    assert done.returncode == 1, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("scanwatch sql: ") and "read-only" in lines[0], done.stderr
    assert dump(history) == before


def test_explain_of_a_read_works(history):
    done = scanwatch_sql(history, "EXPLAIN (ANALYZE, COSTS off) SELECT count(*) FROM issues")
    assert done.returncode == 0, done.stderr
    assert "Aggregate" in done.stdout


def test_a_long_query_is_stopped_at_its_time_limit(history):
    done = scanwatch_sql(history, "SELECT pg_sleep(30)", "--timeout", "1")
    assert done.returncode == 1
    assert "longer than 1 s" in done.stderr and "--timeout" in done.stderr


@pytest.fixture
def own_history(pg_database: str) -> str:
    return _filled(pg_database)


def test_a_reader_returns_while_a_sync_holds_its_write_transaction_open(own_history, pg_server):
    """A real merge stopped before its commit (its workspace's lock and its rows' locks held): the reader's
    query returns at once, with the history as it was, and the merge then commits."""
    reader = reader_url(pg_server, own_history)
    paused, go_on = threading.Event(), threading.Event()

    def hold(name: str) -> None:
        if name == "merge.before_commit" and threading.current_thread().name == "sync":
            paused.set()
            go_on.wait(120)

    outcome: list[object] = []

    def sync() -> None:
        conn = connect(own_history)
        try:
            changed = [dict(_issue(n), status="fixed", fixed_at="2026-11-20T12:30:00Z") if n % 4 else _issue(n)
                       for n in range(20)]
            outcome.append(merge_issues(conn, "ws", changed, now=NOW + timedelta(hours=1)))
        finally:
            conn.close()

    stop = milestones.observe(hold)
    writer = threading.Thread(target=sync, name="sync")
    try:
        writer.start()
        assert paused.wait(120), "the merge never reached its commit"
        held = rows(own_history, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'scanwatch' "
                                 "AND state = 'idle in transaction'")[0][0]
        assert held >= 1  # the sync holds its workspace's turn and its transaction is open
        done = scanwatch_sql(reader, "SELECT count(*) FILTER (WHERE status = 'fixed') FROM issues",
                             "--format", "csv", timeout=30)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[1] == "5"  # the committed history, not the merge under way
    finally:
        go_on.set()
        writer.join(120)
        stop()
    assert outcome and outcome[0].events.get("status_changed") == 15
    assert rows(own_history, "SELECT count(*) FROM issues WHERE status = 'fixed'")[0][0] == 20


def test_a_reader_never_queues_behind_a_schema_change(history, history_admin):
    """A migration holds its table's lock for its transaction: a reader that would wait stops at once with the
    line of a busy history (exit 75), rather than hanging until the sync is done."""
    import psycopg

    with psycopg.connect(history_admin, autocommit=True) as holder:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE issues IN ACCESS EXCLUSIVE MODE")
        done = scanwatch_sql(history, "SELECT count(*) FROM issues", timeout=30)
        holder.execute("ROLLBACK")
    assert done.returncode == 75, done.stderr
    assert "try again in a moment" in done.stderr


@pytest.mark.parametrize(("url", "says"), [
    ("{good}", "SELECT 1"),
    ("postgresql://scanwatch_reader:wrong-password@127.0.0.1:{port}/{db}", "refused the password"),
    ("postgresql://postgres:{password}@127.0.0.1:{port}/missing_database", "no such database"),
    ("postgresql://postgres:{password}@127.0.0.1:1/{db}", "cannot reach the PostgreSQL server"),
])
def test_a_reader_that_cannot_connect_says_why_in_one_line(history, pg_server, url, says):
    db = history.rsplit("/", 1)[1]
    url = url.format(good=history, port=pg_server.port, db=db, password=pg_server.password)
    done = scanwatch_sql(url, "SELECT 1")
    if says == "SELECT 1":
        assert done.returncode == 0
        return
    assert done.returncode == 1 and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert pg_server.password not in done.stderr and "wrong-password" not in done.stderr
