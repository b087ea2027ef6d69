"""The plan gate during a sync: a 402 `api_plan_required` or `api_trial_ended` is recorded, so
`secscan_api_access_allowed` drops to 0 and SecscanApiAccessLost can fire (through promtool and the shipped
rules, fed with the real exporter's exposition); access coming back restores it."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from tests.helpers import build_registry
from tests.ingest.conftest import query, run_sync
from tests.prometheus.replay import alerts_firing


def _metrics_text(db) -> str:
    return generate_latest(build_registry(db.with_name("scanwatch-metrics.json"))).decode()


@pytest.mark.parametrize("plan", ["free", "solo"], ids=["api_plan_required", "api_trial_ended"])
def test_the_plan_gate_marks_api_access_lost_and_the_alert_can_fire(sim, env, tmp_path, plan):
    assert run_sync().success
    before = _metrics_text(env)
    assert 'secscan_api_access_allowed{workspace=' in before and before.count("secscan_api_access_allowed{") == 1
    with sim.world.lock:
        ws = sim.world.workspaces[sim.workspace_id]
        ws.plan, ws.trial_started_at = plan, sim.now() - 15 * 86400  # Free, or a Solo trial that is over
        sim.world.touch()
    outcome = run_sync()
    assert not outcome.success and "402" in str(outcome.error)
    assert query(env, "SELECT api_access_allowed FROM accounts") == [(False,)]
    after = _metrics_text(env)
    assert [line.split()[-1] for line in after.splitlines()
            if line.startswith("secscan_api_access_allowed{")] == ["0.0"]
    alerts_firing([(0, before), (2, after)], alert="SecscanApiAccessLost", at_minute=10,
                  names={"secscan_api_access_allowed"}, expected=1, tmp=tmp_path)
    alerts_firing([(0, before), (2, before)], alert="SecscanApiAccessLost", at_minute=10,
                  names={"secscan_api_access_allowed"}, expected=0, tmp=tmp_path)

    with sim.world.lock:
        sim.world.workspaces[sim.workspace_id].plan = "pro"
        sim.world.touch()
    assert run_sync().success
    assert query(env, "SELECT api_access_allowed FROM accounts") == [(True,)]
