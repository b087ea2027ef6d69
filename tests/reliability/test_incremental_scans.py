"""The incremental scan read must not lose a scan: lists are newest first, and scans created in the same
millisecond (a round of scans started together) tie on `created_at`, so the first known scan of the list
is not a safe place to stop while scans of its instant are still to come."""

from __future__ import annotations

from simulator.testing import SimConfig, serve_simulator
from tests.ingest.conftest import Oracle
from tests.reliability.harness import query_rows, sync_in_process


def test_a_scan_created_in_the_same_instant_as_a_known_one_is_not_lost(tmp_path):
    db = tmp_path / "history.duckdb"
    with serve_simulator(SimConfig(seed=7, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        sim.run_round()
        # New scans appear while the lists are paged, in the same instant as the round's (driven clock).
        sim.set_faults(list_mutation_rate=1.0, list_mutation="insert", scope="lists")
        assert sync_in_process(sim, db).success
        sim.clear_faults()
        sim.advance(3600)  # they finish: their projects move, so the next sync reads their scan lists
        assert sync_in_process(sim, db).success
        shown = Oracle(sim.base_url, sim.api_key).state().scans_by_id()
    stored = {r[0]: r[1] for r in query_rows(db, "SELECT id, status FROM scans")}
    missing = sorted(set(shown) - set(stored))
    assert not missing, f"{len(missing)} scan(s) the service shows were never stored: {missing[:3]}"
    assert {i: stored[i] for i in shown} == {i: s["status"] for i, s in shown.items()}
