"""The PostgreSQL benchmarks run end to end on small worlds and report what their figures say they measure.

Timings are never asserted. What is: each K-process run left K workspaces in the one database and cost the
requests the worlds need, no more (deterministic for a seed); the readers' every phase took reads, none
refused, and the writers' phase lasted as long as its syncs.
"""

from __future__ import annotations

import pytest

from benchmarks import pg_readers, pg_writers


@pytest.mark.slow
def test_k_processes_sync_k_workspaces_into_one_database_at_the_minimum_requests():
    result = pg_writers.measure([1, 2], "small", limit=1000, window=10.0, whole=False, migrated=True)
    rows = result["rows"]
    assert [r["workspaces"] for r in rows] == [1, 2, 1]
    for r in rows:
        assert r["requests"] == r["minimum"] > 0, r  # each process read its own workspace, once
        assert r["wall_seconds"] >= r["process_seconds"]["max"] > 0
        assert r["cpu_seconds"] > 0 and r["server_cpu_seconds"] > 0, r  # the simulator's 11 answers may round to 0
    assert rows[1]["minimum"] == 2 * rows[0]["minimum"]


@pytest.mark.slow
def test_reads_run_at_rest_and_while_syncs_write_and_none_is_refused():
    result = pg_readers.measure("small", writers=2, seconds=2.0, query="open_issues_by_project")
    phases = result["phases"]
    assert list(phases) == ["at rest", "under writes", "at rest after"]
    for phase in phases.values():
        assert phase["door"]["reads"] > 0 and phase["failures"] == 0, phase
    assert phases["at rest after"]["issues"] > phases["at rest"]["issues"]  # the writers wrote
    assert phases["under writes"]["writers_seconds"] > 0
