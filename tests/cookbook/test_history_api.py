"""`pipelines.history`: the cookbook as DataFrames for notebooks, through the same read-only door as the CLI."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from pipelines import history
from pipelines.core import sqlfiles
from pipelines.storage.read_only import execute_read_only


def test_a_cookbook_query_by_name_is_a_dataframe_of_the_cli_answer(history_db: Path) -> None:
    frame = history.query("sla_breaches", db=history_db)
    columns, rows = execute_read_only(history_db, sqlfiles.cookbook()["sla_breaches"].sql)
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == columns
    assert len(frame) == len(rows) > 0
    assert frame["issue_id"].tolist() == [r[columns.index("issue_id")] for r in rows]


def test_ad_hoc_sql_and_the_environment_default(history_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCANWATCH_DB", str(history_db))
    frame = history.query("SELECT severity, count(*) AS n FROM issues GROUP BY 1 ORDER BY 1")
    assert frame["n"].sum() == execute_read_only(history_db, "SELECT count(*) FROM issues")[1][0][0]


def test_cookbook_lists_every_query_with_its_description() -> None:
    listed = history.cookbook()
    assert set(listed) == set(sqlfiles.cookbook())
    assert all(listed.values())


@pytest.mark.parametrize("bad, reason", [
    ("sla_breach", "no cookbook query named 'sla_breach'"),
    ("DELETE FROM issues", "read-only"),
    ("SELECT * FROM read_csv('/etc/passwd')", "query failed"),
])
def test_refusals_are_one_line_and_leave_the_history_as_it_was(history_db: Path, bad: str, reason: str) -> None:
    before = hashlib.sha256(history_db.read_bytes()).hexdigest()
    with pytest.raises(ValueError, match=reason) as info:
        history.query(bad, db=history_db)
    assert "\n" not in str(info.value)
    assert hashlib.sha256(history_db.read_bytes()).hexdigest() == before
