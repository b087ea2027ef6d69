"""The roles deploy/compose.yaml's PostgreSQL makes, made for real and used as the services use them.

deploy/compose/initdb/10-roles.sh runs as the postgres image runs it (as the superuser, over the local socket,
with the passwords in its environment) against a scratch server of its own (the roles are cluster-wide, so not
the session's shared server). Then: a sync as the code location's writer, the exporter's snapshot store as the
reader, the history dashboard's reads as Grafana's role and Dagster's instance as its own; and each refused what
the docs keep from it (docs/postgres.md, "Roles: who gets what").
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import psycopg
import pytest

from exporters.server import serve
from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.impl.postgres.snapshot_store import PolledStore
from tests.deploy.conftest import BIN, ROOT, child_env
from tests.pg_server import PgServer

INITDB = ROOT / "deploy" / "compose" / "initdb" / "10-roles.sh"
PASSWORDS = {"DAGSTER_DB_PASSWORD": "dagster", "SCANWATCH_WRITER_PASSWORD": "scanwatch_writer",
             "SCANWATCH_READER_PASSWORD": "scanwatch_reader", "SCANWATCH_GRAFANA_DB_PASSWORD": "scanwatch_grafana"}


@pytest.fixture(scope="module")
def compose_pg() -> Iterator[tuple[PgServer, dict[str, str]]]:
    server = PgServer.start()
    try:
        # A password with the characters a generated one carries, quotes included: psql quotes it, not a shell.
        passwords = {var: f"{secrets.token_urlsafe(12)}'+/=\"" for var in PASSWORDS}
        env = {"PATH": f"{server.bin_dir}:/usr/bin:/bin", "PGHOST": str(server.socket_dir), "PGPORT": str(server.port),
               "POSTGRES_USER": "postgres", **passwords}
        done = subprocess.run(["bash", str(INITDB)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not any(p in done.stdout + done.stderr for p in passwords.values())
        yield server, {role: passwords[var] for var, role in PASSWORDS.items()}
    finally:
        server.stop()


def _url(server: PgServer, role: str, password: str, database: str = "scanwatch") -> str:
    return f"postgresql://{role}:{quote(password, safe='')}@127.0.0.1:{server.port}/{database}"


def test_no_role_is_a_superuser_or_may_make_roles_or_databases(compose_pg):
    server, _ = compose_pg
    rows = server.psql("SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles "
                       "WHERE rolname IN ('dagster', 'scanwatch_writer', 'scanwatch_reader', 'scanwatch_grafana', "
                       "'scanwatch_views') ORDER BY 1").split()
    assert len(rows) == 5
    assert all(row.split("|")[1:] == ["f", "f", "f", "f"] for row in rows), rows


def test_the_initdb_step_refuses_an_empty_password_with_one_line():
    done = subprocess.run(["bash", str(INITDB)], env={"PATH": "/usr/bin:/bin", **dict.fromkeys(PASSWORDS, "x"),
                                                       "SCANWATCH_READER_PASSWORD": ""},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "SCANWATCH_READER_PASSWORD" in done.stderr


def test_each_service_does_its_work_as_its_role_and_nothing_more(compose_pg, sim, tmp_path):
    server, passwords = compose_pg
    writer = _url(server, "scanwatch_writer", passwords["scanwatch_writer"])

    # The code location's sync, as the writer: the history, its views and the snapshot's parts.
    home = tmp_path / "dagster_home"
    home.mkdir()
    synced = subprocess.run([str(BIN / "scanwatch"), "sync"], env=child_env(sim, SCANWATCH_DB=writer,
                                                                             DAGSTER_HOME=str(home)),
                            capture_output=True, text=True, timeout=300)
    assert synced.returncode == 0, (synced.stdout + synced.stderr)[-3000:]

    # The exporter, as the reader: the parts load and are served.
    store = PolledStore(HistoryLocation.parse(_url(server, "scanwatch_reader", passwords["scanwatch_reader"])),
                        poll_seconds=0.1)
    http_server, _ = serve(store, address="127.0.0.1", port=0)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{http_server.server_port}", timeout=10) as http:
            deadline = time.monotonic() + 30
            while "secscan_project_score{" not in (text := http.get("/metrics").text):
                assert time.monotonic() < deadline, text[-2000:]
                time.sleep(0.1)
        assert re.search(r'^secscan_snapshot_readable\{workspace="[^"]+"\} 1', text, re.M), text[-2000:]
    finally:
        http_server.shutdown()
        store.close()
    with psycopg.connect(_url(server, "scanwatch_reader", passwords["scanwatch_reader"]), autocommit=True) as reader:
        assert reader.execute("SELECT count(*) FROM snapshot_parts").fetchone()[0] >= 1
        assert reader.execute("SELECT count(*) FROM issues").fetchone()[0] > 0
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            reader.execute("DELETE FROM issues")
        reader.execute("SET default_transaction_read_only = off")  # the role's setting lifted: privileges remain
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("DELETE FROM issues")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT pg_read_file('/etc/passwd')")

    # Grafana's data source: the views layer, and no table.
    with psycopg.connect(_url(server, "scanwatch_grafana", passwords["scanwatch_grafana"])) as grafana:
        assert grafana.execute("SELECT count(*) FROM open_issues_now").fetchone()[0] >= 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            grafana.execute("SELECT count(*) FROM issues")

    # Dagster's role: deploy/dagster/dagster.yaml's instance created and migrated in its own database as it,
    # and it reaches nothing of the history's; the history's roles reach nothing of Dagster's.
    shutil.copy(ROOT / "deploy/dagster/dagster.yaml", home / "dagster.yaml")
    instance = child_env(sim, DAGSTER_HOME=str(home), DAGSTER_PG_HOST="127.0.0.1", DAGSTER_PG_PORT=str(server.port),
                         DAGSTER_PG_USER="dagster", DAGSTER_PG_PASSWORD=passwords["dagster"], DAGSTER_PG_DB="dagster")
    migrated = subprocess.run([str(BIN / "dagster"), "instance", "migrate"], env=instance, capture_output=True,
                              text=True, timeout=300)
    assert migrated.returncode == 0, (migrated.stdout + migrated.stderr)[-3000:]
    with psycopg.connect(_url(server, "dagster", passwords["dagster"], "dagster")) as dagster:
        assert dagster.execute("SELECT count(*) FROM pg_tables WHERE tableowner = 'dagster' AND tablename = 'runs'"
                               ).fetchone()[0] == 1
    for role, database in (("dagster", "scanwatch"), ("scanwatch_reader", "dagster"),
                           ("scanwatch_writer", "dagster"), ("scanwatch_grafana", "dagster")):
        with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
            psycopg.connect(_url(server, role, passwords[role], database)).close()
