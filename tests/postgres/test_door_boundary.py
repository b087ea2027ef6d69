"""The read door's boundaries are the server's, role by role (issue 35's reproductions).

One history, built as a deployment builds it: `scanwatch roles` applied first, the tables created and filled
by the writer role (which owns them), two workspaces (`acme`, `globex`) each with issues and a metrics
snapshot part, and a workspace role for `acme`. Each smuggling or renamed-function case runs against every
role docs/postgres.md names, the superuser included: a role that could write is refused unless told
(`as_writer`), and with the override the statement is still one statement in a READ ONLY transaction. The
smuggling text once fooled scanwatch's hand lexer (it saw one statement); SQLGlot's tokenizer reads it as the
server does, so the cases take scanwatch's reading out of the way (`courtesy_check` passes the text through
unread), as any text that fooled it would; the renamed functions are names it does not know. What stops them
is the protocol, the transaction and the role."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from pipelines.commands import roles
from pipelines.storage import connect
from pipelines.storage.destinations.impl.postgres.sqltext import split, words
from pipelines.storage.read_only import ReadRefused, execute_read_only
from tests.backends import rows
from tests.benchmarks.test_merge_unchanged import _issue
from tests.helpers import merge_issues
from tests.postgres.roles import GRAFANA, READER, WRITER, apply_roles, role_url

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACME, GLOBEX = "w-acme", "w-globex"
WORKSPACE_ROLE = roles.workspace_role("acme")
SUPERUSER = "postgres"
EVERY_ROLE = (SUPERUSER, WRITER, READER, GRAFANA, WORKSPACE_ROLE)
CAN_WRITE = (SUPERUSER, WRITER)
SMUGGLED = "SELECT 1 AS 😀$a$; COMMIT; DELETE FROM issues; SELECT 2 AS 😀$a$"


@pytest.fixture(scope="module")
def deployment(pg_server) -> Iterator[dict[str, str]]:
    """{role: URL} of one history built by its writer role, with the superuser's as `admin`."""
    name = pg_server.create_database()
    admin = pg_server.url(name)
    apply_roles(pg_server, admin)
    writer = role_url(pg_server, admin, WRITER)
    conn = connect(writer)
    try:
        for workspace, label, numbers in ((ACME, "acme", range(10)), (GLOBEX, "globex", range(100, 105))):
            conn.execute("INSERT INTO accounts (workspace_id, workspace_name, workspace_label, plan, first_observed_at,"
                         " last_observed_at) VALUES ($ws, $label, $label, 'pro', $now, $now)",
                         {"ws": workspace, "label": label, "now": NOW})
            merge_issues(conn, workspace, [_issue(n) for n in numbers], now=NOW)
        conn.execute("INSERT INTO snapshot_parts (name, generation, written_at, document) VALUES "
                     "($a, 1, $now, '{\"workspace\": \"acme\"}'), ($g, 2, $now, '{\"workspace\": \"globex\"}')",
                     {"a": ACME, "g": GLOBEX, "now": NOW})
        conn.execute("ANALYZE")
    finally:
        conn.close()
    apply_roles(pg_server, admin, ["acme"])
    yield {"admin": admin, **{role: admin if role == SUPERUSER else role_url(pg_server, admin, role)
                              for role in EVERY_ROLE}}
    pg_server.drop_database(name)


def _issues(deployment: dict[str, str]) -> int:
    return rows(deployment["admin"], "SELECT count(*) FROM issues")[0][0]


def scanwatch_sql(url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_")}
    full.update(SCANWATCH_DB=url, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "sql", *args], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=60)


def test_the_smuggled_statements_are_four_to_the_tokenizer_as_to_the_server():
    """SQLGlot's tokenizer reads the smuggling text as the server does (the hand lexer it replaced saw one
    statement); the renamed functions stay names it does not know: nothing in it can be what stops them."""
    assert len(split(SMUGGLED)) == 4
    assert "pg_terminate_backend" not in words('SELECT U&"pg\\005fterminate\\005fbackend"(1)')


@pytest.mark.parametrize("as_writer", [False, True], ids=["plain", "as-writer"])
@pytest.mark.parametrize("role", EVERY_ROLE)
def test_a_second_statement_never_runs_for_any_role(deployment, monkeypatch, role, as_writer):
    from pipelines.storage.destinations.impl.postgres import read_door

    monkeypatch.setattr(read_door, "courtesy_check", lambda sql: sql)  # as a text that fooled scanwatch's reading
    before = _issues(deployment)
    with pytest.raises(ReadRefused) as refused:
        execute_read_only(deployment[role], SMUGGLED, as_writer=as_writer)
    message = str(refused.value)
    assert "\n" not in message
    if role in CAN_WRITE and not as_writer:
        assert f"the role {role!r}" in message and "--as-writer" in message, message
    else:
        assert "one statement at a time" in message, message
    assert _issues(deployment) == before == 15


@pytest.mark.parametrize("role", CAN_WRITE)
def test_with_the_override_a_writer_still_reads_only(deployment, role):
    before = _issues(deployment)
    assert execute_read_only(deployment[role], "SELECT count(*) FROM issues", as_writer=True)[1] == [(15,)]
    for statement in ("WITH gone AS (DELETE FROM issues RETURNING 1) SELECT count(*) FROM gone",
                      "SELECT * FROM issues FOR UPDATE", "SELECT nextval('snapshot_part_generations')"):
        with pytest.raises(ReadRefused, match="read-only"):
            execute_read_only(deployment[role], statement, as_writer=True)
    assert _issues(deployment) == before


@pytest.mark.parametrize("statement", [
    "SELECT U&\"pg\\005fread\\005ffile\"('/etc/passwd')",
    "SELECT pg_ls_dir('.')",
    "SELECT query_to_xml('select rolname, rolpassword from pg_authid', true, false, '')",
    "SELECT U&\"lo\\005fimport\"('/etc/passwd')",
    "SELECT U&\"pg\\005fadvisory\\005fxact\\005flock\"(1), pg_sleep(0)",
    "SELECT U&\"pg\\005fadvisory\\005flock\"(hashtextextended('scanwatch migrate', 0))",
    "SELECT lo_create(0)",
    "SELECT set_config('temp_file_limit', '-1', false)",
])
@pytest.mark.parametrize("role", EVERY_ROLE)
def test_a_function_beyond_reading_is_refused_however_it_is_spelled(deployment, role, statement):
    with pytest.raises(ReadRefused) as refused:
        execute_read_only(deployment[role], statement)
    message = str(refused.value)
    assert "\n" not in message and "root:" not in message and "SCRAM" not in message, message
    if role in CAN_WRITE:
        assert "--as-writer" in message


@pytest.mark.parametrize("role", [WRITER, READER, GRAFANA, WORKSPACE_ROLE])
def test_no_role_of_the_recipe_ends_another_session(deployment, role):
    """`pg_terminate_backend` of a session of the same role (PostgreSQL's default lets a role signal its own
    sessions): the recipe revoked it, so the other reader keeps its session. The writer reads with the override."""
    with psycopg.connect(deployment[role], autocommit=True) as victim:
        pid = victim.info.backend_pid
        for name in ("terminate", "cancel"):
            with pytest.raises(ReadRefused, match="permission denied"):
                execute_read_only(deployment[role], f'SELECT U&"pg\\005f{name}\\005fbackend"({pid})',
                                  as_writer=role == WRITER)
        assert victim.execute("SELECT 1").fetchone() == (1,)


def test_no_reader_can_hold_a_workspace_s_merge(deployment):
    """A reader's own session (not the door: the role is the boundary) can take neither the workspace's lock row
    nor an advisory lock; and a session that does hold the workspace's former advisory key (a superuser's)
    no longer holds the merge: it takes the lock row, which no reader can."""
    with psycopg.connect(deployment[READER], autocommit=True) as reader:
        reader.execute("BEGIN READ WRITE")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT * FROM scanwatch_workspace_locks FOR UPDATE")
        reader.execute("ROLLBACK")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT pg_advisory_lock(hashtextextended('scanwatch workspace w-acme', 0))")
    done = threading.Event()

    def merge() -> None:
        conn = connect(deployment[WRITER])
        try:
            merge_issues(conn, ACME, [_issue(n) for n in range(10)], now=NOW)
            done.set()
        finally:
            conn.close()

    with psycopg.connect(deployment["admin"], autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(hashtextextended('scanwatch workspace w-acme', 0))")
        worker = threading.Thread(target=merge)
        worker.start()
        worker.join(60)
        assert done.is_set(), "a merge waited for a session that holds an advisory lock"


def test_the_workspace_filter_works_for_the_read_only_reader_and_covers_snapshot_parts(deployment):
    """The reader of the recipe has default_transaction_read_only: `--workspace` makes its views all the same;
    and the metrics snapshot's parts are filtered with the tables."""
    url = deployment[READER]
    assert rows(url, "SELECT current_setting('default_transaction_read_only')") == [("on",)]
    assert execute_read_only(url, "SELECT DISTINCT workspace_id FROM issues", workspace="acme")[1] == [(ACME,)]
    assert execute_read_only(url, "SELECT name FROM snapshot_parts", workspace="globex")[1] == [(GLOBEX,)]
    assert execute_read_only(url, "SELECT count(*) FROM issues WHERE status = 'open'", workspace="globex")[1] == [(3,)]


@pytest.mark.parametrize("statement", [
    "SELECT DISTINCT workspace_id FROM issues",
    "SELECT DISTINCT workspace_id FROM public.issues",
    "SELECT DISTINCT workspace_id FROM issue_events",
    "SELECT DISTINCT workspace_id FROM accounts",
    "SELECT name FROM snapshot_parts",
    "SELECT DISTINCT name FROM public.snapshot_parts WHERE document LIKE '%globex%' OR true",
    "SELECT workspace_id FROM issues WHERE workspace_id = 'w-globex'",
    "SELECT string_agg(most_common_vals::text, ',') FROM pg_stats WHERE schemaname = 'public'",
    "SELECT count(*) FROM issues",
])
def test_a_workspace_role_sees_no_other_workspace_whatever_it_types(deployment, statement):
    _, found = execute_read_only(deployment[WORKSPACE_ROLE], statement)
    text = repr(found)
    assert GLOBEX not in text and "globex" not in text
    if statement == "SELECT count(*) FROM issues":
        assert found == [(10,)]


def test_every_table_holding_workspace_rows_shows_a_workspace_role_its_own(deployment):
    tables = [t for (t,) in rows(deployment["admin"], "SELECT c.table_name FROM information_schema.columns c JOIN "
                                 "information_schema.tables t USING (table_schema, table_name) WHERE c.column_name = "
                                 "'workspace_id' AND c.table_schema = 'public' AND t.table_type = 'BASE TABLE'")]
    assert {"issues", "accounts", "projects", "snapshot_parts"} - set(tables) == {"snapshot_parts"}
    for table in tables:
        found = execute_read_only(deployment[WORKSPACE_ROLE], f"SELECT DISTINCT workspace_id FROM {table}")[1]
        assert set(found) <= {(ACME,)}, table


@pytest.mark.parametrize("statement", ["SELECT * FROM open_issues_now", "SET ROLE scanwatch_reader",
                                       "SELECT * FROM pg_authid"])
def test_a_workspace_role_reaches_nothing_around_its_rows(deployment, statement):
    with pytest.raises(ReadRefused):
        execute_read_only(deployment[WORKSPACE_ROLE], statement)


def test_a_workspace_role_cannot_turn_its_policies_off_in_its_own_session(deployment):
    with psycopg.connect(deployment[WORKSPACE_ROLE], autocommit=True) as own:
        own.execute("SET row_security = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            own.execute("SELECT * FROM issues")
        own.execute("RESET row_security")
        own.execute("BEGIN READ WRITE")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            own.execute("ALTER TABLE issues DISABLE ROW LEVEL SECURITY")


def test_a_workspace_role_reads_its_cookbook_through_the_workspace_filter(deployment):
    """The views layer is not granted to a workspace role (a view reads with its owner's rights); the filter's
    temporary copies of the views read with the role's, under its policies: the reader's answer for acme."""
    url = deployment[WORKSPACE_ROLE]
    query = "SELECT count(*) AS n, min(workspace_id) AS w FROM first_severities"
    done = scanwatch_sql(url, query, "--workspace", "acme", "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout == scanwatch_sql(deployment[READER], query, "--workspace", "acme", "--format", "csv").stdout
    assert done.stdout.splitlines()[1:] == [f"10,{ACME}"]
    other = scanwatch_sql(url, "SELECT 1", "--workspace", "globex")
    assert other.returncode == 1 and "no workspace named 'globex'" in other.stderr


def test_a_role_that_could_write_is_refused_in_one_line_unless_told(deployment):
    for role in CAN_WRITE:
        done = scanwatch_sql(deployment[role], "SELECT count(*) FROM issues")
        assert done.returncode == 1, done.stdout
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "--as-writer" in lines[0] and "SCANWATCH_SQL_AS_WRITER" in lines[0], done.stderr
        assert roles.literal("x") not in lines[0]
        told = scanwatch_sql(deployment[role], "SELECT count(*) FROM issues", "--as-writer", "--format", "csv")
        assert told.returncode == 0 and told.stdout.splitlines() == ["count", "15"], told.stderr
        told = scanwatch_sql(deployment[role], "SELECT count(*) FROM issues", "--format", "csv",
                             env={"SCANWATCH_SQL_AS_WRITER": "1"})
        assert told.returncode == 0 and told.stdout.splitlines() == ["count", "15"], told.stderr


def test_the_reader_s_limits_are_the_recipe_s(deployment):
    """The door leaves the role's own budget (no writer's work_mem), and the reader cannot raise the limit on
    temporary files (a superuser's setting)."""
    found = execute_read_only(deployment[READER], "SELECT current_setting('work_mem'), "
                              "current_setting('temp_file_limit'), current_setting('statement_timeout')",
                              timeout=None)[1]
    assert found == [(roles.WORK_MEM, roles.TEMP_FILE_LIMIT, roles.STATEMENT_TIMEOUT)]


@pytest.mark.parametrize("value", ["inf", "nan", "1e7", "-1", "0"])
def test_an_unusable_timeout_is_one_line(deployment, value):
    done = scanwatch_sql(deployment[READER], "SELECT 1", "--timeout", value)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--timeout must be" in lines[0] and "86400" in lines[0], done.stderr


def test_a_large_result_is_cut_at_its_limit_with_a_line_saying_so(deployment):
    done = scanwatch_sql(deployment[READER], "SELECT g, repeat('x', 100) FROM generate_series(1, 3000000) g",
                         "--max-rows", "5", "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == [f"{n},{'x' * 100}" for n in range(1, 6)]
    assert "cut at 5 rows (--max-rows 5)" in done.stderr
    done = scanwatch_sql(deployment[READER], "SELECT g, repeat('x', 100) FROM generate_series(1, 3000000) g",
                         "--max-bytes", "1000", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) < 3000 and "--max-bytes 1000" in done.stderr


@pytest.mark.parametrize("grant", ["NOINHERIT IN ROLE scanwatch_writer", "IN ROLE pg_write_all_data",
                                   "NOINHERIT IN ROLE pg_execute_server_program"])
def test_a_role_that_may_become_a_writer_is_refused_too(deployment, pg_server, grant):
    """A role that inherits nothing may still `SET ROLE` to what it is a member of (a function can, mid-statement):
    what it may become counts."""
    role = f"sneaky_{abs(hash(grant)) % 10**6}"
    pg_server.psql(f"DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN PASSWORD 'Sn3aky-pw' {grant}")
    db = deployment["admin"].rsplit("/", 1)[1]
    pg_server.psql(f"GRANT USAGE ON SCHEMA public TO {role}; GRANT SELECT ON issues TO {role}", database=db)
    try:
        with pytest.raises(ReadRefused, match="--as-writer"):
            execute_read_only(pg_server.url(db, user=role, password="Sn3aky-pw"), "SELECT count(*) FROM issues")
    finally:
        pg_server.psql(f"REVOKE ALL ON issues FROM {role}; REVOKE ALL ON SCHEMA public FROM {role}", database=db)
        pg_server.psql(f"DROP ROLE {role}")


def _roles(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_")}
    env.update(PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "roles", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_roles_command_prints_its_recipe_and_refuses_in_one_line(deployment):
    printed = _roles()
    assert printed.returncode == 0, printed.stderr
    for part in ("pg_terminate_backend", "temp_file_limit = '1GB'", "default_transaction_read_only = on",
                 "REVOKE CREATE ON SCHEMA", "advisory"):
        assert part in printed.stdout, part
    workspace = _roles("--workspace", "acme", "--db", deployment["admin"])
    assert workspace.returncode == 0 and "ENABLE ROW LEVEL SECURITY" in workspace.stdout, workspace.stderr
    assert "snapshot_parts" in workspace.stdout and "'w-acme'" in workspace.stdout
    for args, says in ((["--workspace", "initech", "--db", deployment["admin"]], "no workspace named 'initech'"),
                       (["--apply", "--db", deployment[READER]], "the roles were not applied")):
        done = _roles(*args)
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], done.stderr
        assert "Pw-7q" not in done.stderr


def test_the_notebook_api_creates_nothing_even_as_the_superuser(deployment):
    """`pipelines.history.query` once created a table through the smuggling text: the same door, the same server."""
    from pipelines import history

    smuggled = "SELECT 1 AS 😀$a$; COMMIT; CREATE TABLE stolen AS SELECT 1; SELECT 2 AS 😀$a$"
    for as_writer in (False, True):
        with pytest.raises(ValueError):
            history.query(smuggled, db=deployment[SUPERUSER], as_writer=as_writer)
    assert rows(deployment["admin"], "SELECT to_regclass('stolen') IS NULL") == [(True,)]


@pytest.mark.parametrize("statement", ["SELECT 1; DELETE FROM issues", "COMMIT", "DELETE FROM issues",
                                       "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE"])
def test_without_the_lexer_at_all_the_server_still_refuses(deployment, monkeypatch, statement):
    """The lexer's checks replaced by nothing: the protocol refuses the second statement, the READ ONLY transaction
    the write, and a statement that ends the transaction or changes the session is the last thing that runs."""
    from pipelines.storage.destinations.impl.postgres import read_door as postgres_read

    monkeypatch.setattr(postgres_read, "courtesy_check", lambda sql: sql)
    before = _issues(deployment)
    with pytest.raises(ReadRefused):
        execute_read_only(deployment[SUPERUSER], statement, as_writer=True)
    assert _issues(deployment) == before == 15
