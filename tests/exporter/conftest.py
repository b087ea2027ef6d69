from __future__ import annotations

import pytest

from tests.exporter.history import NOW, add_critical_arrival, fresh_db, load_history
from tests.helpers import build_snapshot


@pytest.fixture
def history_conn():
    conn = fresh_db()
    load_history(conn)
    yield conn
    conn.close()


@pytest.fixture
def fresh_history(new_history):
    """Makes fresh, migrated histories on DuckDB, then on a real PostgreSQL: for the tests of what the snapshot
    holds, which both engines must compute alike."""
    from pipelines.storage import connect

    opened = []

    def make():
        conn = connect(new_history())
        opened.append(conn)
        return conn

    yield make
    for conn in opened:
        conn.close()


@pytest.fixture
def engine_history_conn(fresh_history):
    """The known history (tests/exporter/history.py) on each engine."""
    conn = fresh_history()
    load_history(conn)
    return conn


@pytest.fixture
def snapshot(history_conn) -> dict:
    return build_snapshot(history_conn, now=NOW, critical_info_limit=2)


@pytest.fixture
def snapshot_with_arrival(history_conn) -> dict:
    """The known history plus one critical issue that arrived after the first sync (a page-worthy one)."""
    add_critical_arrival(history_conn)
    return build_snapshot(history_conn, now=NOW, critical_info_limit=2)
