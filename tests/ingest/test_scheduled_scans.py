"""Opt-in scheduled scans: quota read first, reserve kept, one Idempotency-Key per target and tick."""

from __future__ import annotations

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.ingest.conftest import Oracle, query, run_sync


@pytest.fixture
def quick_sim():
    with serve_simulator(SimConfig(seed=5, scale="small", clock="driven", control=True, rate_limit=100000,
                                   scan_seconds=0)) as s:
        yield s


def _run(sim, db, targets: list[str], tick: str, reserve: int = 0):
    from pipelines.resources import HistoryResource, ScanningServiceResource
    from pipelines.scheduled_scans import scheduled_scans_job

    return scheduled_scans_job.execute_in_process(
        run_config={"ops": {"start_and_wait_for_scans": {"config": {
            "target_ids": targets, "tick": tick, "quota_reserve": reserve, "poll_seconds": 0.05}}}},
        resources={"scanning_service": ScanningServiceResource(base_url=sim.base_url, api_key=sim.api_key),
                   "history": HistoryResource(database=str(db))},
    )


def _used(oracle: Oracle) -> int:
    return oracle.http.get("/account").json()["quotas"]["quick_scans"]["used"]


def test_a_retried_tick_spends_nothing_and_the_reserve_is_kept(quick_sim, tmp_path, monkeypatch):
    sim, db = quick_sim, tmp_path / "h.duckdb"
    monkeypatch.setenv("SCANWATCH_BASE_URL", sim.base_url)
    monkeypatch.setenv("SCANWATCH_API_KEY", sim.api_key)
    monkeypatch.setenv("SCANWATCH_DB", str(db))
    assert run_sync().success
    oracle = Oracle(sim.base_url, sim.api_key)
    sites = [t["id"] for p in oracle.walk("/projects") for t in p["targets"] if t["kind"] == "domain"][:2]
    used = _used(oracle)

    first = _run(sim, db, sites, tick="20261122T0300")
    assert first.success
    assert _used(oracle) == used + 2
    scans = query(db, "SELECT id, status FROM scans WHERE target_id IN ('" + "','".join(sites) + "') "
                      "AND created_at = (SELECT max(created_at) FROM scans)")
    assert scans and all(status in ("done", "failed") for _, status in scans)

    again = _run(sim, db, sites, tick="20261122T0300")  # the same tick retried: replayed, nothing spent
    assert again.success and _used(oracle) == used + 2

    sim.advance(7200)  # past the hour of reuse: a new tick would now spend quota
    account = oracle.http.get("/account").json()
    room = account["quotas"]["quick_scans"]["remaining"] + account["pack_credits"]["scans"]
    guarded = _run(sim, db, sites, tick="20261123T0300", reserve=room - 1)  # room for one scan only
    assert guarded.success and _used(oracle) == used + 3
    output = next(e for e in guarded.all_events if e.event_type_value == "STEP_OUTPUT")
    assert output.event_specific_data.metadata["skipped_for_quota"].value == 1


def test_reused_says_a_scan_request_was_answered_with_an_existing_scan(quick_sim, tmp_path, monkeypatch):
    sim, db = quick_sim, tmp_path / "h.duckdb"
    monkeypatch.setenv("SCANWATCH_BASE_URL", sim.base_url)
    monkeypatch.setenv("SCANWATCH_API_KEY", sim.api_key)
    monkeypatch.setenv("SCANWATCH_DB", str(db))
    assert run_sync().success
    site = Oracle(sim.base_url, sim.api_key).walk("/projects")[0]["targets"][0]["id"]
    assert _run(sim, db, [site], tick="20261124T0300").success
    (first,) = query(db, f"SELECT id, reused FROM scans WHERE target_id = '{site}' "
                         f"AND created_at = (SELECT max(created_at) FROM scans WHERE target_id = '{site}')")
    assert _run(sim, db, [site], tick="20261124T0310").success  # another tick within the hour: reused
    assert run_sync(full_reconcile=True).success  # the list shows reused false; the history keeps what it saw
    assert first[1] is False  # a new scan when first started
    assert query(db, f"SELECT reused FROM scans WHERE id = '{first[0]}'") == [(True,)]
