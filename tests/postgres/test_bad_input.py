"""A PostgreSQL history that cannot be used is one line naming what to fix, and nothing is half-written: an
unreachable server, a wrong password, a missing database, a read-only server given as the writer (a real hot
standby made with pg_basebackup, and `default_transaction_read_only`), a server restarting mid-sync. The
password appears in none of those lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.commands.sync import root_cause
from pipelines.core import milestones
from pipelines.storage import HistoryUnavailableError, connect
from simulator.testing import SimConfig, serve_simulator
from tests.backends import dump, failure, rows, sync_history

ROOT = Path(__file__).resolve().parents[2]
CORE = {"accounts": "workspace_id", "projects": "id", "targets": "id", "scans": "id", "issues": "id",
        "issue_events": "issue_id, event", "scans_gone": "scan_id", "ingest_warnings": "entity, entity_id, field"}


def scanwatch(url: str, *args: str, base_url: str = "http://127.0.0.1:9/v1", key: str = "rst_" + "k" * 40
              ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env.update(SCANWATCH_DB=url, SCANWATCH_BASE_URL=base_url, SCANWATCH_API_KEY=key, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def sync_in_process(url: str, capsys, monkeypatch) -> subprocess.CompletedProcess[str]:
    """`scanwatch sync` as the command runs it, in this process: its check of the history comes before Dagster
    starts, so a refused history costs no interpreter of its own."""
    from pipelines.cli import main

    for key in [k for k in os.environ if k.startswith(("SCANWATCH_", "DAGSTER_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SCANWATCH_DB", url)
    monkeypatch.setenv("SCANWATCH_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SCANWATCH_API_KEY", "rst_" + "k" * 40)
    capsys.readouterr()
    code = main(["sync"])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["scanwatch", "sync"], code, out, err)


def one_line(done: subprocess.CompletedProcess[str], *secrets: str) -> str:
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("scanwatch "), done.stderr[-2000:]
    for secret in secrets:
        assert secret not in done.stderr + done.stdout
    return lines[0]


@pytest.mark.parametrize(("url", "says"), [
    ("postgresql://postgres:{password}@127.0.0.1:1/{db}", "cannot reach the PostgreSQL server"),
    ("postgresql://postgres:not-the-password@127.0.0.1:{port}/{db}", "refused the password"),
    ("postgresql://postgres:{password}@127.0.0.1:{port}/no_such_history", "no such database"),
    ("postgresql://postgres@127.0.0.1:{port}/{db}", "refused the password"),  # and no PGPASSWORD, no .pgpass
])
def test_a_history_that_cannot_be_opened_is_one_line_before_any_request(pg_server, pg_database, url, says,
                                                                        tmp_path, monkeypatch, capsys):
    db = pg_database.rsplit("/", 1)[1]
    url = url.format(password=pg_server.password, port=pg_server.port, db=db)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.pgpass of the machine's
    monkeypatch.delenv("PGPASSWORD", raising=False)
    done = sync_in_process(url, capsys, monkeypatch)
    assert done.returncode == 2
    line = one_line(done, pg_server.password, "not-the-password")
    assert says in line, line


def test_the_password_may_come_from_pgpassword_or_pgpass(pg_server, pg_database, tmp_path, monkeypatch):
    """libpq's own rules: scanwatch passes the URL without its password and libpq finds it, for the writer
    and for the reader alike; with neither, the line says where to put it."""
    from pipelines.storage.read_only import ReadRefused, execute_read_only

    bare = pg_database.replace(f":{pg_server.password}@", "@")
    assert pg_server.password not in bare
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    connect(bare).close()  # the writer opens and migrates the history
    monkeypatch.delenv("PGPASSWORD")
    pgpass = tmp_path / ".pgpass"
    pgpass.write_text(f"127.0.0.1:{pg_server.port}:*:postgres:{pg_server.password}\n")
    pgpass.chmod(0o600)
    # The superuser is the one role of this server: read as it, on purpose (the door refuses it otherwise).
    assert execute_read_only(bare, "SELECT count(*) FROM schema_migrations", as_writer=True)[1][0][0] > 0
    pgpass.unlink()
    with pytest.raises(ReadRefused, match=r"refused the password.*PGPASSWORD or ~/\.pgpass"):
        execute_read_only(bare, "SELECT 1", as_writer=True)


def test_a_hot_standby_given_as_the_writer_is_refused_and_serves_readers(pg_server, pg_database, capsys,
                                                                         monkeypatch):
    connect(pg_database).close()  # a history on the primary, replicated to the standby
    standby = pg_server.standby()
    try:
        url = standby.url(pg_database.rsplit("/", 1)[1])
        done = sync_in_process(url, capsys, monkeypatch)
        assert done.returncode == 2
        line = one_line(done, pg_server.password)
        assert "hot standby" in line and "point SCANWATCH_DB at the primary" in line, line
        # As the superuser, the one role of these servers, on purpose.
        read = scanwatch(url, "sql", "SELECT max(version) AS v FROM schema_migrations", "--format", "csv",
                         "--as-writer")
        assert read.returncode == 0, read.stderr  # readers may use a replica
        assert read.stdout.splitlines()[1] == str(rows(pg_database, "SELECT max(version) FROM schema_migrations")[0][0])
    finally:
        standby.stop()


def test_a_server_set_read_only_is_refused_as_the_writer(pg_server, pg_database, capsys, monkeypatch):
    db = pg_database.rsplit("/", 1)[1]
    pg_server.psql(f'ALTER DATABASE "{db}" SET default_transaction_read_only = on')
    done = sync_in_process(pg_database, capsys, monkeypatch)
    assert done.returncode == 2
    line = one_line(done, pg_server.password)
    assert "read-only (default_transaction_read_only)" in line, line
    assert rows(pg_database, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")[0][0] == 0


def test_a_server_restarting_mid_merge_fails_the_sync_in_one_line_and_the_next_sync_catches_up(
        pg_server, monkeypatch):
    """The issues merge loses its server between its statements and its commit: the server rolled it back, so
    no issue of that group is in; the line says what happened; the next sync ends where a clean one does."""
    work, clean = pg_server.url(pg_server.create_database()), pg_server.url(pg_server.create_database())
    config = SimConfig(seed=31, scale="small", clock="driven", control=True, rate_limit=100000)
    with serve_simulator(config) as sim:
        monkeypatch.setenv("SCANWATCH_BASE_URL", sim.base_url)
        monkeypatch.setenv("SCANWATCH_API_KEY", sim.api_key)
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
        monkeypatch.setenv("SCANWATCH_DB", work)
        passages: list[str] = []

        def restart(name: str) -> None:
            # The first commit of the issues merge, whichever steps committed before it: scans and issues both
            # follow the projects, and their order is not the contract's (counting commits once restarted the
            # server under the scans' merge instead, and 228 issues were in).
            if name == "merge.before_commit" and not passages and _within("merge_issue_stages"):
                passages.append(name)
                pg_server.restart()

        stop = milestones.observe(restart)
        try:
            broken = sync_history()
        finally:
            stop()
        assert passages and not broken.success
        line = root_cause(next(iter(broken.get_step_failure_events())).step_failure_data.error)
        assert "lost the PostgreSQL server" in line and "rolled back" in line and pg_server.password not in line
        assert rows(work, "SELECT count(*) FROM issues")[0][0] == 0  # the group is not half in
        assert rows(work, "SELECT count(*) FROM sync_runs WHERE asset = 'issues' AND status = 'failure'")[0][0] == 1
        again = sync_history()
        assert again.success, failure(again)
    with serve_simulator(config) as sim:
        monkeypatch.setenv("SCANWATCH_BASE_URL", sim.base_url)
        monkeypatch.setenv("SCANWATCH_API_KEY", sim.api_key)
        monkeypatch.setenv("SCANWATCH_DB", clean)
        reference = sync_history()
        assert reference.success, failure(reference)
    assert dump(work, CORE) == dump(clean, CORE)
    assert rows(work, "SELECT count(*) FROM issues")[0][0] > 0


def _within(function: str) -> bool:
    """Whether this thread is inside a call of `function` (a milestone is reached in the committing thread)."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


SECRET = "Sec+ret/9="  # given in every URL below, percent-encoded; under trust the server never asks for it


_BRANCHES = [
    ("no_role", "trust", "has no such role"),
    ("no_role", "password", "refused the password"),  # under password authentication the server tells no more
    ("wrong_password", "password", "refused the password"),
    *[(case, auth, says) for auth in ("trust", "password") for case, says in (
        ("no_database", "has no such database"), ("no_login", "may not log in"),
        ("unreachable", "cannot reach the PostgreSQL server"),
        ("not_accepting", "cannot open the PostgreSQL history"))],
]


@pytest.mark.parametrize(("case", "auth", "says"), _BRANCHES)
def test_every_branch_of_a_refused_connection_is_one_right_line_without_the_password(
        pg_server, pg_database, case, says, auth, tmp_path, monkeypatch, capsys):
    """Each answer a server gives a connection, as `sync` and `sql` say it: under trust authentication (the
    cluster's Unix socket, where the server says which role is missing) and under password authentication
    (TCP, scram-sha-256, where it does not). The password given is in no line; the line names the fix."""
    from urllib.parse import quote

    from pipelines.cli import main

    db = pg_database.rsplit("/", 1)[1]
    role = {"no_role": "nobody_here", "no_login": "cannot_login"}.get(case, "postgres")
    if case == "no_login":
        pg_server.psql(f"DO $$ BEGIN CREATE ROLE cannot_login PASSWORD '{SECRET}'; "
                       "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    if case == "not_accepting":
        pg_server.psql(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS false')
    password = {"postgres": pg_server.password, "cannot_login": SECRET}.get(role, SECRET)
    if case == "wrong_password":
        password = SECRET
    host = quote(str(pg_server.socket_dir), safe="") if auth == "trust" else "127.0.0.1"
    port = 1 if case == "unreachable" else pg_server.port
    if case == "unreachable" and auth == "trust":
        host = quote(str(tmp_path / "no-server-here"), safe="")
    database = "no_such_history" if case == "no_database" else db
    url = f"postgresql://{role}:{quote(password, safe='')}@{host}:{port}/{database}"
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    try:
        # The message itself (what Dagster's run storage keeps of a step that fails so), before any output's
        # own filter.
        with pytest.raises(HistoryUnavailableError) as caught:
            connect(url)
        message = str(caught.value)
        assert says.split(" ", 1)[1] in message and password not in message and quote(password, safe="") not in message
        done = sync_in_process(url, capsys, monkeypatch)
        assert done.returncode == 2
        line = one_line(done, password, quote(password, safe=""), pg_server.password)
        assert line.startswith("scanwatch sync: ") and says in line, line
        assert ":***@" in line, line
        code = main(["sql", "SELECT 1"])
        out, err = capsys.readouterr()
        read = one_line(subprocess.CompletedProcess([], code, out, err), password, quote(password, safe=""))
        assert code != 0 and says in read, read
    finally:
        if case == "not_accepting":
            pg_server.psql(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS true')


def test_a_url_libpq_cannot_read_is_one_line_without_the_password(pg_server, pg_database, capsys, monkeypatch):
    """A parameter libpq does not know: refused before any connection, the URL masked."""
    done = sync_in_process(f"{pg_database}?sslmode=disable&no_such_option=1", capsys, monkeypatch)
    assert done.returncode == 2
    line = one_line(done, pg_server.password)
    assert "not a valid PostgreSQL URL" in line and "no_such_option" in line, line
