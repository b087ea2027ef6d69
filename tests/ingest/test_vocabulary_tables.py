"""The vocabulary tables: written when the history's copy differs from pipelines/core/vocabulary.py, else left."""

from __future__ import annotations

from pathlib import Path

from pipelines.core import vocabulary
from pipelines.storage import db
from pipelines.storage.reference import write_vocabulary


def _severities(conn) -> list[str]:
    return [r[0] for r in conn.execute("SELECT severity FROM severities ORDER BY rank").fetchall()]


def test_an_up_to_date_copy_is_left_and_a_drifted_one_rewritten(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "h.duckdb")
    try:
        assert _severities(conn) == list(vocabulary.SEVERITIES)
        assert write_vocabulary(conn) is False  # the open already wrote it: nothing to do
        conn.execute("DELETE FROM severities WHERE severity = 'info'")
        conn.execute("UPDATE scan_statuses SET finished = NOT finished WHERE status = 'failed'")
        assert write_vocabulary(conn) is True
        assert _severities(conn) == list(vocabulary.SEVERITIES)
        finished = [r[0] for r in conn.execute("SELECT status FROM scan_statuses WHERE finished ORDER BY rank")
                    .fetchall()]
        assert finished == list(vocabulary.FINISHED_SCAN_STATUSES)
        conn.execute("DELETE FROM sla_policy")
        assert write_vocabulary(conn) is True
        assert dict(conn.execute("SELECT severity, days FROM sla_policy").fetchall()) == vocabulary.DEFAULT_SLA_DAYS
    finally:
        conn.close()


def test_reopening_repairs_a_copy_that_drifted(tmp_path: Path) -> None:
    path = tmp_path / "h.duckdb"
    conn = db.connect(path)
    conn.execute("UPDATE issue_statuses SET dismissed = false")
    conn.close()
    conn = db.connect(path)
    try:
        dismissed = [r[0] for r in conn.execute("SELECT status FROM issue_statuses WHERE dismissed ORDER BY rank")
                     .fetchall()]
        assert dismissed == list(vocabulary.DISMISSED_STATUSES)
    finally:
        conn.close()
