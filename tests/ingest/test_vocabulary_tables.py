"""The vocabulary tables: written when the history's copy differs from pipelines/core/vocabulary.py, else left."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipelines.core import vocabulary
from pipelines.storage import db
from pipelines.storage.reference import write_vocabulary

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_next_run_repairs_a_copy_that_drifted(tmp_path: Path) -> None:
    """A process checks the copy once (its later opens trust it): a copy edited by hand is repaired by the
    next run, a process of its own as every scheduled run is."""
    path = tmp_path / "h.duckdb"
    conn = db.connect(path)
    conn.execute("UPDATE issue_statuses SET dismissed = false")
    conn.close()
    opener = "import sys; from pipelines.storage import db; db.connect(sys.argv[1]).close()"
    subprocess.run([sys.executable, "-c", opener, str(path)], check=True, cwd=ROOT, timeout=120)
    conn = db.connect(path)
    try:
        dismissed = [r[0] for r in conn.execute("SELECT status FROM issue_statuses WHERE dismissed ORDER BY rank")
                     .fetchall()]
        assert dismissed == list(vocabulary.DISMISSED_STATUSES)
    finally:
        conn.close()
