from __future__ import annotations

import pytest

from pipelines.snapshot import build_snapshot
from tests.exporter.history import NOW, add_critical_arrival, fresh_db, load_history


@pytest.fixture
def history_conn():
    conn = fresh_db()
    load_history(conn)
    yield conn
    conn.close()


@pytest.fixture
def snapshot(history_conn) -> dict:
    return build_snapshot(history_conn, now=NOW, critical_info_limit=2)


@pytest.fixture
def snapshot_with_arrival(history_conn) -> dict:
    """The known history plus one critical issue that arrived after the first sync (a page-worthy one)."""
    add_critical_arrival(history_conn)
    return build_snapshot(history_conn, now=NOW, critical_info_limit=2)
