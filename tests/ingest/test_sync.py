"""Two syncs with a world advance between them leave exactly the right history."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from tests.ingest.conftest import Oracle, query, requests_of, run_sync


def _ts(value: str | None):
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


def _issue_rows(db) -> dict:
    rows = query(db, "SELECT id, status, severity, fixed_at, last_seen_at, target_id FROM issues")
    return {r[0]: r[1:] for r in rows}


def _expected_issue_rows(issues: Iterable[dict]) -> dict:
    return {i["id"]: (i["status"], i["severity"], _ts(i["fixed_at"]), _ts(i["last_seen_at"]), i["target_id"])
            for i in issues}


def test_first_sync_holds_what_the_service_shows_at_the_minimum_cost(sim, env):
    oracle = Oracle(sim.base_url, sim.api_key)
    outcome = run_sync()
    assert outcome.success, outcome.error
    state = oracle.state()
    assert _issue_rows(env) == _expected_issue_rows(state.all_issues())
    assert {r[0] for r in query(env, "SELECT id FROM scans")} == set(state.scans_by_id())
    assert sorted(r[0] for r in query(env, "SELECT id FROM projects")) == sorted(p["id"] for p in state.projects)
    targets = {t["id"]: (t["verified"], t["score"], t["hidden_issues"])
               for p in state.projects for t in p["targets"]}
    assert {r[0]: r[1:] for r in query(env, "SELECT id, verified, score, hidden_issues FROM targets")} == targets
    assert sorted(r[0] for r in query(env, "SELECT quota FROM quota_snapshots")) == ["audits", "fixes", "quick_scans"]
    # Every issue first seen by this sync has exactly one 'opened' event and nothing else.
    assert query(env, "SELECT count(*), count(DISTINCT issue_id) FROM issue_events WHERE event = 'opened'")[0] == (
        len(state.all_issues()), len(state.all_issues()))
    assert query(env, "SELECT count(*) FROM issue_events WHERE event <> 'opened'")[0][0] == 0
    assert requests_of(outcome) == state.minimum_requests


def test_unchanged_resync_costs_account_and_projects_and_writes_no_event(sim, env):
    assert run_sync().success
    before = query(env, "SELECT count(*) FROM issue_events")[0][0], query(env, "SELECT count(*) FROM issues")[0][0]
    again = run_sync()
    assert again.success
    assert requests_of(again) == 2
    assert (query(env, "SELECT count(*) FROM issue_events")[0][0], query(env, "SELECT count(*) FROM issues")[0][0]) \
        == before
    # A full reconcile reads everything again and still finds nothing new.
    full = run_sync(full_reconcile=True)
    assert full.success and requests_of(full) > 2
    assert query(env, "SELECT count(*) FROM issue_events")[0][0] == before[0]


def _expected_events(old: dict, new: dict) -> set[tuple]:
    """The events a correct diff of two API states yields, computed here without SQL."""
    out = set()
    for iid, n in new.items():
        o = old.get(iid)
        if o is None:
            out.add((iid, "opened", None, n["status"]))
            continue
        if o["status"] == "fixed" and n["status"] != "fixed":
            out.add((iid, "reopened", "fixed", n["status"]))
        elif o["status"] != n["status"]:
            out.add((iid, "status_changed", o["status"], n["status"]))
        if o["severity"] != n["severity"]:
            out.add((iid, "severity_changed", o["severity"], n["severity"]))
    return out


def test_world_advance_and_marks_become_exact_events(sim, env):
    oracle = Oracle(sim.base_url, sim.api_key)
    assert run_sync().success
    old = oracle.state().issues_by_id()
    first_sync_at = query(env, "SELECT max(observed_at) FROM issue_events")[0][0]

    summary = sim.run_round()
    assert summary["new"] and summary["fixed"] and summary["reopened"] and summary["severity_changed"]
    # Marks through the API: a false positive, an accepted risk, and a mark that is undone.
    open_now = [i for i in oracle.state().all_issues() if i["status"] == "open"]
    reason = {"reason": "handled by the WAF in front of this site"}
    for issue, status in zip(open_now[:3], ["false_positive", "accepted_risk", "false_positive"], strict=True):
        oracle.http.patch(f"/issues/{issue['id']}", json={"status": status, **reason}).raise_for_status()
    assert run_sync().success
    mid = oracle.state().issues_by_id()
    oracle.http.patch(f"/issues/{open_now[2]['id']}", json={"status": "open"}).raise_for_status()
    assert run_sync(full_reconcile=True).success
    new = oracle.state().issues_by_id()

    got_mid = set(query(env, f"SELECT issue_id, event, from_value, to_value FROM issue_events "
                             f"WHERE observed_at > '{first_sync_at}' AND observed_at < (SELECT max(observed_at) "
                             "FROM issue_events)"))
    got_last = set(query(env, "SELECT issue_id, event, from_value, to_value FROM issue_events "
                              "WHERE observed_at = (SELECT max(observed_at) FROM issue_events)"))
    assert got_mid == _expected_events(old, mid)
    assert {e[1] for e in got_mid} >= {"opened", "status_changed", "reopened", "severity_changed"}
    assert got_last == _expected_events(mid, new) == {(open_now[2]["id"], "status_changed", "false_positive", "open")}
    assert _issue_rows(env) == _expected_issue_rows(new.values())
    marked = query(env, f"SELECT status, status_reason, marked_by FROM issues WHERE id = '{open_now[1]['id']}'")[0]
    assert marked[0] == "accepted_risk" and marked[1] == reason["reason"] and marked[2]
    # first_observed_at never moves; last_observed_at does.
    assert query(env, "SELECT count(*) FROM issues WHERE first_observed_at > last_observed_at")[0][0] == 0


def test_a_scan_of_one_project_costs_only_that_project(sim, env):
    oracle = Oracle(sim.base_url, sim.api_key)
    assert run_sync().success
    project = oracle.walk("/projects")[0]
    target = project["targets"][0]
    scan = oracle.http.post(f"/targets/{target['id']}/scans", json={}, headers={"Idempotency-Key": "t-one"}).json()
    sim.advance(3600)
    assert oracle.http.get(f"/scans/{scan['id']}").json()["status"] in ("done", "failed")
    out = run_sync()
    assert out.success
    issue_pages = max(1, -(-len(oracle.walk(f"/projects/{project['id']}/issues")) // 100))
    assert requests_of(out) == 2 + 1 + issue_pages
    assert query(env, f"SELECT status FROM scans WHERE id = '{scan['id']}'")[0][0] in ("done", "failed")


def test_scans_reach_their_merge_through_stage_files_not_held_in_memory(sim, env):
    """A first sync reads a year of scans; held as Python objects until their merge, they left tens of MB of
    the process's memory behind for the rest of the sync. Like issues, they are written to stage files as
    the pages arrive, and the files are gone once the step ends."""
    from pipelines.core import milestones
    from pipelines.storage.stage import stage_folder

    staged: list[int] = []

    def count_staged(name: str) -> None:
        if name == "scans.before_state":  # the scans merged, the step not ended
            staged.append(sum(len(f.read_bytes().splitlines()) for f in stage_folder().glob("scans-*")))

    stop = milestones.observe(count_staged)
    try:
        outcome = run_sync()
    finally:
        stop()
    assert outcome.success, outcome.error
    scans = query(env, "SELECT count(*) FROM scans")[0][0]
    assert scans > 0
    assert staged == [scans]
    assert not list(stage_folder().glob("scans-*"))
