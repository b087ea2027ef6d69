"""One SLA policy: with `SCANWATCH_SLA_DAYS` set, the cookbook's `sla_breaches` counts what `/metrics`
(`secscan_issues_sla_breached`, which `SecscanSlaBreached` fires on) counts."""

from __future__ import annotations

import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipelines.core import sqlfiles
from pipelines.snapshot.format import read_snapshot
from pipelines.storage import connect
from pipelines.storage.read_only import execute_read_only
from pipelines.storage.workspaces import current_workspace
from pipelines.sync.snapshot import refresh_snapshot


def _breaches(db: Path, snapshot: Path) -> tuple[Counter, Counter]:
    """Open issues past their SLA by severity: as the cookbook lists them, and as the snapshot counts them."""
    columns, rows = execute_read_only(db, sqlfiles.cookbook()["sla_breaches"].sql)
    listed = Counter(row[columns.index("severity")] for row in rows)
    counted: Counter = Counter()
    for row in read_snapshot(snapshot)["tables"]["issue_severity"]:
        counted[row["severity"]] += row["sla_breached"] or 0
    return +listed, +counted


def _sync_snapshot(history_db: Path, tmp_path: Path, name: str) -> tuple[Path, Path]:
    db = tmp_path / f"{name}.duckdb"
    shutil.copy(history_db, db)
    conn = connect(db)
    try:
        refresh_snapshot(conn, workspace_id=current_workspace(conn, None), label=None, path=tmp_path / f"{name}.json",
                         now=datetime.now(UTC))
    finally:
        conn.close()
    return db, tmp_path / f"{name}.json"


def test_sla_breaches_follows_scanwatch_sla_days_like_the_metrics(
        history_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = _breaches(*_sync_snapshot(history_db, tmp_path, "default"))
    monkeypatch.setenv("SCANWATCH_SLA_DAYS", "critical=1,high=1,medium=1,low=1")
    listed, counted = _breaches(*_sync_snapshot(history_db, tmp_path, "strict"))
    assert listed == counted
    assert sum(listed.values()) > sum(default[0].values()), "the stricter policy must find more breaches"
    assert default[0] == default[1]


def test_time_to_fix_counts_the_same_issues_in_the_cookbook_and_the_metrics(history_db: Path, tmp_path: Path) -> None:
    # An issue open again after a fix whose fixed_at the service still shows, and a fixed one the service
    # gave no first_seen_at: one sample (fix_times) decides for both readers.
    db = tmp_path / "h.duckdb"
    shutil.copy(history_db, db)
    conn = connect(db)
    try:
        conn.execute("UPDATE issues SET status = 'open', fixed_at = now() WHERE id = (SELECT min(id) FROM issues "
                     "WHERE status = 'open' AND hidden_reason IS NULL)")
        conn.execute("UPDATE issues SET first_seen_at = NULL WHERE id = (SELECT min(id) FROM issues "
                     "WHERE status = 'fixed' AND fixed_at IS NOT NULL)")
    finally:
        conn.close()
    _, snapshot = _sync_snapshot(db, tmp_path, "ttf")
    columns, rows = execute_read_only(db, sqlfiles.cookbook()["time_to_fix_by_severity"].sql)
    listed = {row[columns.index("severity")]: row[columns.index("fixed_issues")] for row in rows}
    counted: Counter = Counter()
    for row in read_snapshot(snapshot)["tables"]["time_to_fix"]:
        counted[row["severity"]] += row["count"]
    assert listed == dict(+counted)
    columns, rows = execute_read_only(db, sqlfiles.cookbook()["time_to_fix_by_project"].sql)
    assert sum(row[columns.index("fixed_issues")] for row in rows) == sum(counted.values())
