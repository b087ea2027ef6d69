"""The code location Dagster loads: the asset graph, its checks, schedules and the scan-finished sensor."""

from __future__ import annotations

import dagster as dg
import pytest

from pipelines.defs.partitions import register
from tests.ingest.conftest import Oracle, query, run_sync


def _defs():
    from pipelines.definitions import defs

    return defs()


def test_code_location_has_the_promised_graph(env):
    defs = _defs()
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {"account", "projects", "targets", "scans", "issues", "metrics_snapshot"}
    checks = {k.name for k in graph.asset_check_keys}
    assert {"issue_ids_unique", "fixed_exactly_when_fixed_at", "last_seen_not_before_first_seen",
            "issue_targets_exist", "no_issues_of_unverified_targets"} <= checks
    schedules = {s.name: s for s in defs.schedules}
    assert schedules["refresh_schedule"].cron_schedule == "*/15 * * * *"
    assert schedules["scans_schedule"].cron_schedule == "0 * * * *"
    assert schedules["refresh_schedule"].default_status == dg.DefaultScheduleStatus.RUNNING
    assert schedules["scheduled_scans_schedule"].default_status == dg.DefaultScheduleStatus.STOPPED
    sensor = next(s for s in defs.sensors if s.name == "scan_finished_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    for job in ("sync_job", "refresh_job", "scans_job", "project_refresh_job", "scheduled_scans_job"):
        defs.resolve_job_def(job)


def test_every_job_runs_in_process_and_whole_history_steps_in_the_duckdb_pool(env):
    """A process per step cost a scheduled refresh 50 to 80 s for a second of work; the pool still guards
    DuckDB, which the in-process executor honours step by step, for the steps that hold the history for their
    whole work. The ingestion assets hold it only while they merge (several workspaces read the service at
    once), so they stay out of the pool: in it, one workspace's rate-limited read would hold up the others."""
    defs = _defs()
    graph = defs.resolve_asset_graph()
    for name in ("sync_job", "refresh_job", "scans_job", "project_refresh_job", "scheduled_scans_job",
                 "__ASSET_JOB"):
        assert defs.resolve_job_def(name).executor_def is dg.in_process_executor, name
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.is_materializable:
            assert node.pools == ({"duckdb"} if key.to_user_string() == "metrics_snapshot" else set()), key
    from pipelines.defs.checks import history_checks

    for check in history_checks:
        assert check.op.pool == "duckdb", check.op.name


def test_sensor_asks_for_the_project_whose_scan_finished(sim, env):
    from pipelines.defs.resources import HistoryResource, ScanningServiceResource
    from pipelines.defs.sensors import scan_finished_sensor

    oracle = Oracle(sim.base_url, sim.api_key)
    target = oracle.walk("/projects")[1]["targets"][0]
    oracle.http.post(f"/targets/{target['id']}/scans", json={}, headers={"Idempotency-Key": "s-1"}).raise_for_status()
    assert run_sync().success  # the history now holds the scan as queued
    resources = {"scanning_service": ScanningServiceResource(base_url=sim.base_url, api_key=sim.api_key),
                 "history": HistoryResource(database=str(env))}
    with dg.build_sensor_context(resources=resources, instance=dg.DagsterInstance.ephemeral()) as ctx:
        skipped = scan_finished_sensor(ctx)
    assert isinstance(skipped, dg.SkipReason) and "still running" in skipped.skip_message
    sim.advance(3600)
    with dg.build_sensor_context(resources=resources, instance=dg.DagsterInstance.ephemeral()) as ctx:
        (request,) = scan_finished_sensor(ctx)
    assert isinstance(request, dg.RunRequest) and request.partition_key == "default"
    assert request.run_config["ops"]["issues"]["config"]["project_ids"] == [target["project_id"]]


def test_a_scan_the_hourly_scans_run_settles_between_two_ticks_still_gets_its_issues_read_at_once(sim, engine_env):
    """The scans run reads the finished scan before the sensor polls it: nothing is left queued, so the sensor
    asks for the refresh because the project's issues are behind its scans. Not while a run of the workspace
    is under way (it may read them itself), and once only: the refresh brings the issues level, and leaves no
    other project behind. Mutations that fail it: the rule left out of the sensor; the busy guard left out;
    the refresh reading every moved project's scans (a run asked for after it)."""
    from dagster._core.utils import make_new_run_id

    from pipelines.defs.assets import ALL_ASSETS
    from pipelines.defs.jobs import project_refresh_job, scans_job
    from pipelines.defs.resources import HistoryResource, ScanningServiceResource, default_resources
    from pipelines.defs.sensors import scan_finished_sensor

    oracle = Oracle(sim.base_url, sim.api_key)
    target = oracle.walk("/projects")[1]["targets"][0]
    oracle.http.post(f"/targets/{target['id']}/scans", json={}, headers={"Idempotency-Key": "s-2"}).raise_for_status()
    assert run_sync().success
    sim.advance(3600)  # the scan finishes between two ticks
    instance = dg.DagsterInstance.ephemeral()
    register(instance, ["default"])

    def run(job: dg.UnresolvedAssetJobDefinition, **kw) -> None:  # with this test's resources, as the job selects
        result = dg.materialize(ALL_ASSETS, selection=job.selection, resources=default_resources(),
                                instance=instance, partition_key="default", **kw)
        assert result.success

    run(scans_job)
    resources = {"scanning_service": ScanningServiceResource(base_url=sim.base_url, api_key=sim.api_key),
                 "history": HistoryResource(database=engine_env)}

    def tick(on: dg.DagsterInstance = instance):
        with dg.build_sensor_context(resources=resources, instance=on) as ctx:
            return scan_finished_sensor(ctx)

    (request,) = tick()
    assert request.partition_key == "default" and request.tags["scanwatch/trigger"] == "issues_behind_scans"
    assert request.run_config["ops"]["issues"]["config"]["project_ids"] == [target["project_id"]]
    (again,) = tick()
    assert again.run_key == request.run_key  # the same move asks for the same run, which Dagster runs once

    busy = dg.DagsterInstance.ephemeral()
    busy.add_run(dg.DagsterRun(job_name="refresh_job", run_id=make_new_run_id(),
                               tags={"dagster/partition": "default"}, status=dg.DagsterRunStatus.STARTED))
    assert isinstance(tick(busy), dg.SkipReason)

    # Every project moves before the refresh runs: it reads the named project's scans and issues only, so it
    # leaves no other project's issues behind its scans, and asks for no run after it (the hourly scans run
    # reads the others' scans, the refresh their issues).
    sim.advance(600)
    sim.run_round()
    run(project_refresh_job, run_config=request.run_config)
    assert isinstance(tick(), dg.SkipReason)


def test_the_history_checks_run_in_one_step_and_only_for_the_selected_assets(env):
    from pipelines.defs.assets import ALL_ASSETS
    from pipelines.defs.checks import history_checks
    from pipelines.defs.resources import default_resources

    def run(selection=None) -> tuple[dict[str, bool], set[str]]:
        instance = dg.DagsterInstance.ephemeral()
        register(instance, ["default"])
        result = dg.materialize([*ALL_ASSETS, *history_checks], resources=default_resources(),
                                instance=instance, selection=selection, partition_key="default")
        assert result.success
        evaluations = {e.event_specific_data.check_name: e.event_specific_data.passed for e in result.all_events
                       if e.event_type_value == "ASSET_CHECK_EVALUATION"}
        return evaluations, {e.step_key for e in result.all_events if e.is_step_success}

    evaluations, steps = run()
    assert evaluations == dict.fromkeys(
        ("issue_ids_unique", "scan_ids_unique", "fixed_exactly_when_fixed_at", "last_seen_not_before_first_seen",
         "issue_targets_exist", "no_issues_of_unverified_targets"), True)
    assert steps == {"account", "projects_and_targets", "scans", "issues", "metrics_snapshot", "history_checks"}
    evaluations, _ = run(["account", "projects", "targets", "scans"])
    assert evaluations == {"scan_ids_unique": True}


@pytest.mark.parametrize("moves", [True, False], ids=["failed-scan-moves-last-scan", "failed-scan-moves-nothing"])
def test_the_sensors_run_settles_a_failed_scan_under_either_reading(tmp_path, monkeypatch, moves):
    """The sensor's run reads the scans of the projects it names only when they moved (or their look is due):
    where a failed scan moves nothing GET /projects shows, the queued scan is still read again by id and
    settled, and no further run is asked for."""
    from pipelines.defs.resources import HistoryResource, ScanningServiceResource
    from pipelines.defs.sensors import scan_finished_sensor
    from simulator.testing import SimConfig, serve_simulator

    config = SimConfig(seed=11, scale="small", clock="driven", control=True, rate_limit=100000,
                       scan_failure_rate=1.0, readings={"failed_scan_moves_last_scan": moves})
    db = str(tmp_path / "history.duckdb")
    with serve_simulator(config) as sim:
        for key, value in {"SCANWATCH_BASE_URL": sim.base_url, "SCANWATCH_API_KEY": sim.api_key,
                           "SCANWATCH_DB": db}.items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
        site = sim.target_ids(kind="domain", verified=True)[0]
        scan = Oracle(sim.base_url, sim.api_key).http.post(
            f"/targets/{site}/scans", json={}, headers={"Idempotency-Key": "f-1"}).raise_for_status().json()
        assert run_sync().success
        sim.advance(3600)
        resources = {"scanning_service": ScanningServiceResource(base_url=sim.base_url, api_key=sim.api_key),
                     "history": HistoryResource(database=db)}
        instance = dg.DagsterInstance.ephemeral()

        def tick():
            with dg.build_sensor_context(resources=resources, instance=instance) as ctx:
                return scan_finished_sensor(ctx)

        (request,) = tick()
        assert request.tags["scanwatch/trigger"] == "scan_finished"
        from pipelines.defs.assets import ALL_ASSETS
        from pipelines.defs.jobs import project_refresh_job
        from pipelines.defs.resources import default_resources

        assert dg.materialize(ALL_ASSETS, selection=project_refresh_job.selection, resources=default_resources(),
                              instance=instance, partition_key="default", run_config=request.run_config).success
        assert query(db, f"SELECT status FROM scans WHERE id = '{scan['id']}'") == [("failed",)]
        assert isinstance(tick(), dg.SkipReason)


def test_the_sensors_skip_line_names_a_few_workspaces_per_reason(sim, tmp_path, monkeypatch):
    """Seven workspaces none of which the history has read are one reason naming five and counting the rest:
    at a thousand workspaces the tick's line is one per reason, not one per workspace."""
    from pipelines.defs.resources import HistoryResource, ScanningServiceResource
    from pipelines.defs.sensors import scan_finished_sensor
    from pipelines.storage import connect

    names = [f"ws{n}" for n in range(1, 8)]
    (tmp_path / "workspaces.yml").write_text("workspaces:\n" + "".join(
        f"  - name: {n}\n    api_key_env: KEY_{n.upper()}\n" for n in names))
    for n in names:
        monkeypatch.setenv(f"KEY_{n.upper()}", sim.api_key)
    monkeypatch.setenv("SCANWATCH_BASE_URL", sim.base_url)
    monkeypatch.setenv("SCANWATCH_WORKSPACES_FILE", str(tmp_path / "workspaces.yml"))
    db = tmp_path / "history.duckdb"
    connect(db).close()
    resources = {"scanning_service": ScanningServiceResource(base_url=sim.base_url,
                                                             workspaces_file=str(tmp_path / "workspaces.yml")),
                 "history": HistoryResource(database=str(db))}
    with dg.build_sensor_context(resources=resources, instance=dg.DagsterInstance.ephemeral()) as ctx:
        skipped = scan_finished_sensor(ctx)
    assert isinstance(skipped, dg.SkipReason)
    assert skipped.skip_message == "ws1, ws2, ws3, ws4, ws5 and 2 more workspaces: no history of this workspace yet"
