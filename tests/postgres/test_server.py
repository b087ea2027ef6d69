"""The scratch PostgreSQL server the suite runs against is real: it answers SQL and refuses a wrong password."""

import psycopg
import pytest


def test_the_server_answers_and_checks_passwords(pg_server, pg_database):
    with psycopg.connect(pg_database) as conn:
        assert conn.execute("SELECT current_setting('server_version_num')::int").fetchone()[0] >= 150000
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (1), (2)")
        assert conn.execute("SELECT sum(x) FROM t").fetchone()[0] == 3
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(pg_server.url(pg_database.rsplit("/", 1)[1], password="wrong")).close()
