"""Scheduled scans over real HTTP: the kind fits each target, one refusal never stops the others, paused
projects are skipped, and the budget is kept per quota kind with pack credits and audit fallbacks counted."""

from __future__ import annotations

from tests.ingest.conftest import query
from tests.ingest.scheduled import read_account, run_scheduled


def _latest_kinds(db, targets: list[str]) -> dict[str, tuple]:
    rows = query(db, "SELECT target_id, kind, audit_fallback FROM scans WHERE target_id IN ('" + "','".join(targets)
                     + "') QUALIFY row_number() OVER (PARTITION BY target_id ORDER BY created_at DESC) = 1")
    return {t: (k, f) for t, k, f in rows}


def _skips(db) -> dict[str, tuple]:
    return {t: (status, reason) for t, status, reason in
            query(db, "SELECT target_id, status, reason FROM scan_request_skips")}


def test_the_kind_fits_each_target(scheduled_world):
    sim, db = scheduled_world
    repo = sim.target_ids(kind="repository")[0]
    proved, unproved = sim.target_ids(kind="domain", verified=True)[0], sim.target_ids(kind="domain", verified=False)[0]
    meta = run_scheduled(sim, db, [repo, proved, unproved], kind="audit")
    assert meta["started"] == 3 and meta["skipped"] == 0
    kinds = _latest_kinds(db, [repo, proved, unproved])
    assert kinds[repo][0] == "repository"
    assert kinds[proved][0] == "audit"
    assert kinds[unproved][0] == "quick"  # an audit needs a proved site: the site gets the scan it allows


def test_refusals_are_recorded_per_target_and_the_others_go_on(scheduled_world):
    sim, db = scheduled_world
    repo, site = sim.target_ids(kind="repository")[0], sim.target_ids(kind="domain")[0]
    sim.set_faults(repository_host_down=True)
    used = read_account(sim)["quotas"]["quick_scans"]["used"]
    meta = run_scheduled(sim, db, [repo, site, "00000000-0000-4000-8000-000000000000"])
    assert meta["started"] == 1
    assert read_account(sim)["quotas"]["quick_scans"]["used"] == used + 1
    skips = _skips(db)
    assert skips[repo] == (409, "repository_host_unavailable")
    assert skips["00000000-0000-4000-8000-000000000000"] == (None, "target_not_listed")
    assert site not in skips and _latest_kinds(db, [site])[site][0] == "quick"

    sim.clear_faults()
    sim.set_faults(busy_rate=1.0)
    meta = run_scheduled(sim, db, [site, sim.target_ids(kind="domain")[1]], tick="20261124T0400")
    assert meta["started"] == 0 and meta["skipped"] == 2
    busy = query(db, "SELECT count(*) FROM scan_request_skips WHERE status = 503 AND reason = 'platform_busy'")
    assert busy == [(2,)]


def test_paused_projects_are_skipped(scheduled_world):
    sim, db = scheduled_world
    paused_project, other_project = sim.project_ids()[:2]
    sites = [t for t in sim.target_ids(kind="domain") if sim.world.targets[t].project_id == paused_project][:1]
    others = [t for t in sim.target_ids(kind="domain") if sim.world.targets[t].project_id == other_project][:1]
    sim.pause_project(paused_project)
    used = read_account(sim)["quotas"]["quick_scans"]["used"]
    meta = run_scheduled(sim, db, sites + others)
    assert meta["started"] == 1 and read_account(sim)["quotas"]["quick_scans"]["used"] == used + 1
    assert _skips(db)[sites[0]] == (None, "project_paused")


def test_an_audit_fallback_is_charged_to_the_quick_budget(scheduled_world):
    sim, db = scheduled_world
    sites = sim.target_ids(kind="domain", verified=True)[:2]
    for site in sites:
        sim.verify_target(site, verified=True, proof_holds=False)  # proved once, the proof no longer holds
    quotas = read_account(sim)["quotas"]
    sim.set_usage(quick_scans=quotas["quick_scans"]["limit"] - 3, pack_scans=0)  # 3 quick left, 2 kept
    meta = run_scheduled(sim, db, sites, kind="audit", reserve=2)
    account = read_account(sim)
    assert meta["audit_fallbacks"] == 1 and meta["skipped_for_quota"] == 1
    assert account["quotas"]["quick_scans"]["remaining"] == 2  # the reserve is intact
    assert account["quotas"]["audits"]["used"] == quotas["audits"]["used"]  # no audit counted
    assert _latest_kinds(db, sites[:1])[sites[0]] == ("quick", True)


def test_pack_credits_add_to_each_quota_kind(scheduled_world):
    sim, db = scheduled_world
    proved = sim.target_ids(kind="domain", verified=True)[:2]
    quotas = read_account(sim)["quotas"]
    sim.set_usage(audits=quotas["audits"]["limit"], pack_scans=1)  # audits used up, one pack credit left
    meta = run_scheduled(sim, db, proved, kind="audit")
    assert meta["started"] == 1 and meta["skipped_for_quota"] == 1
    assert read_account(sim)["pack_credits"]["scans"] == 0
