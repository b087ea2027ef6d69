"""The A/B refresh benchmark runs end to end on a small history and measures what it says it measures.

Timings are never asserted. What is: the history is built once and reused by the next call (read in full
again first when its projects' last full read is too old), and each run refreshed the workspaces asked for,
each at the contract's two requests.
"""

from __future__ import annotations

import duckdb
import pytest

from benchmarks import refresh_ab
from tests.workspaces.pair import ROOT


def test_the_refreshed_workspaces_are_spread_over_the_file():
    assert refresh_ab.spread(4, 12) == [1, 3, 6, 9]
    assert refresh_ab.spread(12, 12) == list(range(1, 13))


@pytest.mark.slow
def test_each_tree_refreshes_a_copy_of_one_history_at_two_requests_a_workspace(tmp_path):
    runs = refresh_ab.run(6, 3, [ROOT, ROOT], 1, tmp_path)
    with duckdb.connect(str(tmp_path / "duckdb-6" / "history.duckdb")) as conn:  # read in full 7 hours ago
        conn.execute("UPDATE project_sync_state SET full_reconcile_at = full_reconcile_at - INTERVAL 7 HOUR")
    assert refresh_ab.reconciled_hours_ago(tmp_path / "duckdb-6" / "history.duckdb") > 7
    again = refresh_ab.run(6, 3, [ROOT], 1, tmp_path)  # the history built by the first call, read again first
    assert refresh_ab.reconciled_hours_ago(tmp_path / "duckdb-6" / "history.duckdb") < 1
    assert [(p.name, p.parent.name) for p in tmp_path.glob("*/history.duckdb")] == [("history.duckdb", "duckdb-6")]
    (done,) = runs.values()  # both trees are this checkout: one entry, two runs
    for run in [*done, *next(iter(again.values()))]:
        assert run["requests"] == 6 and run["failed_workspaces"] == [], run
