"""Opt-in scheduled scans: quota read first, reserve kept, one Idempotency-Key per target and tick."""

from __future__ import annotations

from tests.ingest.conftest import Oracle, query, run_sync
from tests.ingest.scheduled import run_scheduled


def _used(oracle: Oracle) -> int:
    return oracle.http.get("/account").json()["quotas"]["quick_scans"]["used"]


def test_a_retried_tick_spends_nothing_and_the_reserve_is_kept(scheduled_world):
    sim, db = scheduled_world
    oracle = Oracle(sim.base_url, sim.api_key)
    sites = [t["id"] for p in oracle.walk("/projects") for t in p["targets"] if t["kind"] == "domain"][:2]
    used = _used(oracle)

    run_scheduled(sim, db, sites, tick="20261122T0300")
    assert _used(oracle) == used + 2
    scans = query(db, "SELECT id, status FROM scans WHERE target_id IN ('" + "','".join(sites) + "') "
                      "AND created_at = (SELECT max(created_at) FROM scans)")
    assert scans and all(status in ("done", "failed") for _, status in scans)

    run_scheduled(sim, db, sites, tick="20261122T0300")  # the same tick retried: replayed, nothing spent
    assert _used(oracle) == used + 2

    sim.advance(7200)  # past the hour of reuse: a new tick would now spend quota
    account = oracle.http.get("/account").json()
    room = account["quotas"]["quick_scans"]["remaining"] + account["pack_credits"]["scans"]
    guarded = run_scheduled(sim, db, sites, tick="20261123T0300", reserve=room - 1)  # room for one scan only
    assert _used(oracle) == used + 3
    assert guarded["skipped_for_quota"] == 1


def test_reused_says_a_scan_request_was_answered_with_an_existing_scan(scheduled_world):
    sim, db = scheduled_world
    site = Oracle(sim.base_url, sim.api_key).walk("/projects")[0]["targets"][0]["id"]
    run_scheduled(sim, db, [site], tick="20261124T0300")
    (first,) = query(db, f"SELECT id, reused FROM scans WHERE target_id = '{site}' "
                         f"AND created_at = (SELECT max(created_at) FROM scans WHERE target_id = '{site}')")
    run_scheduled(sim, db, [site], tick="20261124T0310")  # another tick within the hour: reused
    assert run_sync(full_reconcile=True).success  # the list shows reused false; the history keeps what it saw
    assert first[1] is False  # a new scan when first started
    assert query(db, f"SELECT reused FROM scans WHERE id = '{first[0]}'") == [(True,)]
