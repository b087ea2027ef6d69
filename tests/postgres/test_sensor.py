"""The scan-finished sensor reads a PostgreSQL history as it reads a DuckDB one: the queued scans it holds,
with a reader's connection that never waits for a sync."""

from __future__ import annotations

import dagster as dg

from simulator.testing import SimConfig, serve_simulator
from tests.backends import failure, sync_history
from tests.ingest.conftest import Oracle


def test_the_sensor_asks_for_the_refresh_of_a_finished_scan_from_a_postgresql_history(pg_database, monkeypatch):
    from pipelines.defs.resources import HistoryResource, ScanningServiceResource
    from pipelines.defs.sensors import scan_finished_sensor

    config = SimConfig(seed=11, scale="small", clock="driven", control=True, rate_limit=100000)
    with serve_simulator(config) as sim:
        for key, value in {"SCANWATCH_BASE_URL": sim.base_url, "SCANWATCH_API_KEY": sim.api_key,
                           "SCANWATCH_DB": pg_database}.items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
        site = sim.target_ids(kind="domain", verified=True)[0]
        Oracle(sim.base_url, sim.api_key).http.post(f"/targets/{site}/scans", json={},
                                                     headers={"Idempotency-Key": "s-1"}).raise_for_status()
        result = sync_history()
        assert result.success, failure(result)
        resources = {"scanning_service": ScanningServiceResource(base_url=sim.base_url, api_key=sim.api_key),
                     "history": HistoryResource(database=dg.EnvVar("SCANWATCH_DB"))}
        with dg.build_sensor_context(resources=resources, instance=dg.DagsterInstance.ephemeral()) as ctx:
            waiting = scan_finished_sensor(ctx)
        assert isinstance(waiting, dg.SkipReason) and "still running" in str(waiting.skip_message)
        sim.advance(3600)
        with dg.build_sensor_context(resources=resources, instance=dg.DagsterInstance.ephemeral()) as ctx:
            (request,) = scan_finished_sensor(ctx)
    assert request.run_config["ops"]["issues"]["config"]["project_ids"] == [sim.world.targets[site].project_id]
