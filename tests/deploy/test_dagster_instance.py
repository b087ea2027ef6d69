"""deploy/dagster/dagster.yaml on a real PostgreSQL: runs, schedule ticks and sensor cursors live there and
outlast the daemon.

Dagster's own processes run as an operator starts them: `dagster job execute` for a first sync, then
`dagster-daemon run` (a real process, its own session) with the refresh schedule every minute. Its schedule
tick runs `refresh_job`, the scan-finished sensor sees the scans the first sync left queued finish on the
simulator and runs `project_refresh_job`, and the run-failure sensor keeps its cursor. The daemon is stopped
and started again: everything it recorded is still there, it goes on from it (no second run for a tick it
already ran, the sensor's interval counted from its last tick before the restart, the cursor kept).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import dagster as dg
import pytest
from dagster._core.scheduler.instigation import TickStatus

from benchmarks.oracle import Oracle
from tests.deploy.conftest import BIN, ROOT, child_env

INSTANCE_FILE = ROOT / "deploy" / "dagster" / "dagster.yaml"
PARTITION = '{"dagster/partition": "default"}'


def _pg_env(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    return {"DAGSTER_PG_HOST": parts.hostname or "", "DAGSTER_PG_PORT": str(parts.port),
            "DAGSTER_PG_USER": unquote(parts.username or ""), "DAGSTER_PG_PASSWORD": unquote(parts.password or ""),
            "DAGSTER_PG_DB": parts.path.lstrip("/")}


@pytest.fixture
def deployment(pg_database, sim, tmp_path, monkeypatch) -> Iterator[dict[str, Any]]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(INSTANCE_FILE, home / "dagster.yaml")
    pg = _pg_env(pg_database)
    for key, value in pg.items():  # this process reads the same instance to check what the daemon did
        monkeypatch.setenv(key, value)
    env = child_env(sim, DAGSTER_HOME=str(home), SCANWATCH_DB=str(tmp_path / "history.duckdb"),
                    SCANWATCH_REFRESH_CRON="* * * * *", SCANWATCH_SCANS_CRON="0 0 1 1 *", **pg)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield {"env": env, "home": home, "instance": instance, "sim": sim, "dir": tmp_path}


@contextlib.contextmanager
def daemon(deployment: dict[str, Any], log_name: str) -> Iterator[subprocess.Popen]:
    log = (deployment["dir"] / log_name).open("wb")
    proc = subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-m", "pipelines.definitions"],
                            env=deployment["env"], cwd=deployment["dir"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: the daemon and the code server it started
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def _wait_for(what: str, found: Callable[[], Any], deployment: dict[str, Any], log: str, seconds: float = 240):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(1)
    tail = (deployment["dir"] / log).read_text(errors="replace")[-4000:]
    raise AssertionError(f"timed out waiting for {what}; daemon log:\n{tail}")


def _state(instance: dg.DagsterInstance, name: str):
    return next((s for s in instance.all_instigator_state() if s.name == name), None)


def _ticks(instance: dg.DagsterInstance, name: str) -> list:
    state = _state(instance, name)
    return [] if state is None else instance.get_ticks(state.instigator_origin_id, state.selector_id)


def _succeeded(instance: dg.DagsterInstance, run_ids) -> list[dg.DagsterRun]:
    runs = [instance.get_run_by_id(r) for r in run_ids]
    return [r for r in runs if r is not None and r.status == dg.DagsterRunStatus.SUCCESS]


def _ticked_run(instance: dg.DagsterInstance, name: str, job: str, after: float = 0.0):
    """A tick of `name` after `after` whose runs all ended in success, and those runs."""
    for tick in _ticks(instance, name):
        if tick.status == TickStatus.SUCCESS and tick.timestamp > after and tick.run_ids:
            done = _succeeded(instance, tick.run_ids)
            if len(done) == len(tick.run_ids) and all(r.job_name == job for r in done):
                return tick, done
    return None


def test_runs_ticks_and_cursors_live_in_postgresql_and_outlast_the_daemon(deployment):
    instance, sim = deployment["instance"], deployment["sim"]
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"

    # A first sync from the command line, with a scan left running on the service.
    oracle = Oracle(sim.base_url, sim.api_key)
    target = oracle.walk("/projects")[1]["targets"][0]
    oracle.http.post(f"/targets/{target['id']}/scans", json={}, headers={"Idempotency-Key": "deploy-1"}
                     ).raise_for_status()
    first = subprocess.run([str(BIN / "dagster"), "job", "execute", "-m", "pipelines.definitions", "-j", "sync_job",
                            "--tags", PARTITION], env=deployment["env"], cwd=deployment["dir"], capture_output=True,
                           text=True, timeout=300)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    (sync_run,) = instance.get_runs(filters=dg.RunsFilter(job_name="sync_job"))
    assert sync_run.status == dg.DagsterRunStatus.SUCCESS
    sim.advance(3600)  # the scan finishes on the service

    with daemon(deployment, "daemon-1.log"):
        tick, refresh_runs = _wait_for("a refresh_schedule tick and its run", lambda: _ticked_run(
            instance, "refresh_schedule", "refresh_job"), deployment, "daemon-1.log")
        assert refresh_runs[0].tags["dagster/partition"] == "default"
        _, project_runs = _wait_for("the scan-finished sensor's run", lambda: _ticked_run(
            instance, "scan_finished_sensor", "project_refresh_job"), deployment, "daemon-1.log")
        assert project_runs[0].tags["scanwatch/trigger"] == "scan_finished"
        cursor = _wait_for("the run-failure sensor's cursor", lambda: getattr(
            getattr(_state(instance, "snapshot_after_failure"), "instigator_data", None), "cursor", None),
            deployment, "daemon-1.log")
        sensor_ticks_before = _ticks(instance, "scan_finished_sensor")
    stopped = time.time()
    runs_before = {r.run_id: r.status for r in instance.get_runs()}
    schedule_ticks_before = {t.tick_id for t in _ticks(instance, "refresh_schedule")}

    with dg.DagsterInstance.from_config(str(deployment["home"])) as fresh:  # a new process's view of the same store
        assert {r.run_id: r.status for r in fresh.get_runs()} == runs_before
        assert tick.tick_id in {t.tick_id for t in _ticks(fresh, "refresh_schedule")}
        assert _state(fresh, "snapshot_after_failure").instigator_data.cursor == cursor

    with daemon(deployment, "daemon-2.log"):
        _wait_for("a refresh_schedule tick after the restart", lambda: _ticked_run(
            instance, "refresh_schedule", "refresh_job", after=stopped), deployment, "daemon-2.log")
        later_sensor = _wait_for("a scan-finished sensor tick after the restart", lambda: [
            t for t in _ticks(instance, "scan_finished_sensor") if t.timestamp > stopped], deployment, "daemon-2.log")

    # Nothing recorded before the restart was lost or redone.
    after = {r.run_id: r.status for r in instance.get_runs()}
    assert {k: after[k] for k in runs_before} == runs_before
    assert schedule_ticks_before <= {t.tick_id for t in _ticks(instance, "refresh_schedule")}
    schedule_runs = instance.get_runs(filters=dg.RunsFilter(job_name="refresh_job"))
    run_keys = [r.tags.get("dagster/run_key") for r in schedule_runs]
    assert len(run_keys) == len(set(run_keys)) >= 2  # one run per workspace per tick, never twice
    # The sensor's interval ran on from its last tick before the restart, read back from PostgreSQL.
    last_before = max(t.timestamp for t in sensor_ticks_before)
    assert min(t.timestamp for t in later_sensor) >= last_before + 60 - 1
    assert {t.tick_id for t in sensor_ticks_before} <= {t.tick_id for t in _ticks(instance, "scan_finished_sensor")}
    assert _state(instance, "snapshot_after_failure").instigator_data.cursor is not None
