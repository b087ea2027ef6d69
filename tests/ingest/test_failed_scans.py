"""Scans the fingerprint cannot see: a failed scan need not move anything GET /projects shows.

The contract does not promise that a failed scan moves its target's last_scan_at, score or counts, so the
simulator serves both readings and scanwatch must find the failed scans under each within one scans-schedule
interval, at a cost of at most one request per project per interval.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest
from prometheus_client import generate_latest

from simulator.testing import SimConfig, serve_simulator
from tests.helpers import build_registry
from tests.ingest.conftest import query, requests_of, run_sync
from tests.prometheus.replay import alerts_firing


@pytest.fixture(params=[False, True], ids=["failed-scan-moves-nothing", "failed-scan-moves-last-scan"])
def sim(request) -> Iterator:
    config = SimConfig(seed=11, scale="small", clock="driven", control=True, rate_limit=100000,
                       scan_failure_rate=1.0, readings={"failed_scan_moves_last_scan": request.param})
    with serve_simulator(config) as s:
        yield s


def _an_interval_passes(db) -> None:
    """The scans schedule's interval passes (the sync's clock is the wall clock: move the last reads back)."""
    with duckdb.connect(str(db)) as conn:
        conn.execute("UPDATE project_sync_state SET scans_synced_at = scans_synced_at - INTERVAL 61 MINUTE")


def _metrics_text(db) -> str:
    return generate_latest(build_registry(db.with_name("scanwatch-metrics.json"))).decode()


def test_failed_scans_reach_the_history_metrics_and_alert_within_one_interval(sim, env, tmp_path):
    assert run_sync().success
    projects = len(sim.project_ids())
    # While nothing is new, the peek costs one scan page per project per interval, and nothing between two.
    _an_interval_passes(env)
    quiet = run_sync()
    assert requests_of(quiet) == 2 + projects and quiet.metadata["scans"]["projects_peeked"] == projects
    assert requests_of(run_sync()) == 2
    before = _metrics_text(env)
    failed = sim.run_round()["scan_ids"]
    assert failed and all(sim.world.scans[s].status == "failed" for s in failed)
    moves = sim.rt.config.readings["failed_scan_moves_last_scan"]

    # Within the interval, a project that did not move costs nothing.
    again = run_sync()
    assert again.success
    if not moves:
        assert requests_of(again) == 2
        assert not set(failed) & {r[0] for r in query(env, "SELECT id FROM scans")}

    _an_interval_passes(env)
    later = run_sync()
    assert later.success
    stored = dict(query(env, "SELECT id, status FROM scans"))
    assert all(stored.get(s) == "failed" for s in failed)
    # The peek: one scan page per project (plus account and projects), never more while nothing is new.
    assert requests_of(later) <= 2 + projects

    after = _metrics_text(env)
    targets = {sim.world.scans[s].target_id for s in failed}
    failing = [line for line in after.splitlines() if line.startswith("secscan_target_last_scan_failed{")
               and line.endswith(" 1.0") and any(t in line for t in targets)]
    assert len(failing) == len(targets)
    # Prometheus, scraping these two expositions, fires SecscanScansFailing for the projects with 2+ failures.
    per_project: dict[str, int] = {}
    for s in failed:
        per_project[sim.world.scans[s].project_id] = per_project.get(sim.world.scans[s].project_id, 0) + 1
    alerts_firing([(0, before), (5, after)], alert="SecscanScansFailing", at_minute=20,
                  names={"secscan_scans_total"}, expected=sum(1 for n in per_project.values() if n >= 2),
                  tmp=tmp_path)
    alerts_firing([(0, before), (5, before)], alert="SecscanScansFailing", at_minute=20,
                  names={"secscan_scans_total"}, expected=0, tmp=tmp_path)


@pytest.mark.slow
def test_the_peek_costs_one_request_per_project_per_interval(sim, env):
    """The long form of the peek's cost: interval after interval (CI checks one, above)."""
    assert run_sync().success
    projects = len(sim.project_ids())
    for _ in range(2):
        _an_interval_passes(env)
        outcome = run_sync()
        assert outcome.success
        assert requests_of(outcome) == 2 + projects
        assert outcome.metadata["scans"]["projects_peeked"] == projects
    assert requests_of(run_sync()) == 2  # and nothing between two intervals
