"""One slow workspace never costs another its run: two workspaces on two simulators, one made slow with
the simulator's latency fault. The scan-finished sensor gives each its own time budget, `scanwatch sync`
runs them at once even with DAGSTER_HOME set (into a DuckDB file, whose one writer they take turns on where
they write, and, in the soak, into a PostgreSQL history, which takes both writers at once), and scheduled
scans go to their own workspace with its key. The sensor and the schedule read the history through the engine
layer that the other suites run on both engines; they stay on DuckDB here, where the cost is the workspaces'
first sync."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.backends import BACKENDS, ENGINES, rows
from tests.ingest.conftest import Oracle
from tests.reliability import forked
from tests.reliability.harness import ROOT

pytestmark = pytest.mark.timeout(900)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

FILE = """workspaces:
  - name: slow
    base_url: {slow}
    api_key_env: SCANWATCH_KEY_SLOW
  - name: fast
    base_url: {fast}
    api_key_env: SCANWATCH_KEY_FAST
    scan_targets: [{target}]
"""


def _sync(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return forked.run(["sync", "--quiet", *args], env, timeout=600, cwd=ROOT)


def _sites(sim, n: int) -> list[str]:
    """Targets a quick scan can start on: sites of projects that are not paused."""
    oracle = Oracle(sim.base_url, sim.api_key)
    return [t["id"] for p in oracle.walk("/projects") if not p["paused"] for t in p["targets"]
            if t["kind"] == "domain"][:n]


@pytest.fixture(scope="module")
def worlds(tmp_path_factory) -> Iterator[SimpleNamespace]:
    tmp = tmp_path_factory.mktemp("isolation")
    config = dict(scale="small", clock="driven", control=True, rate_limit=100000)
    with serve_simulator(SimConfig(seed=21, **config)) as slow, serve_simulator(SimConfig(seed=22, **config)) as fast:
        target = _sites(fast, 1)[0]
        (tmp / "workspaces.yml").write_text(FILE.format(slow=slow.base_url, fast=fast.base_url, target=target))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
        env.update({"SCANWATCH_WORKSPACES_FILE": str(tmp / "workspaces.yml"), "SCANWATCH_KEY_SLOW": slow.api_key,
                    "SCANWATCH_KEY_FAST": fast.api_key, "SCANWATCH_DB": str(tmp / "h.duckdb"),
                    "SCANWATCH_SNAPSHOT": str(tmp / "m.json")})
        first = _sync(env)
        assert first.returncode == 0, first.stderr
        yield SimpleNamespace(slow=slow, fast=fast, env=env, tmp=tmp, target=target)


SENSOR = """
import json, time
import dagster as dg
from pipelines.defs.resources import default_resources
from pipelines.defs.sensors import scan_finished_sensor
started = time.monotonic()
with dg.build_sensor_context(resources=default_resources(), instance=dg.DagsterInstance.ephemeral()) as ctx:
    result = scan_finished_sensor(ctx)
print(json.dumps({"seconds": time.monotonic() - started,
                  "runs": [] if isinstance(result, dg.SkipReason) else [r.partition_key for r in result]}))
"""


def test_a_slow_workspace_never_costs_another_its_run_request(worlds):
    for sim, n in ((worlds.slow, 5), (worlds.fast, 1)):
        for site in _sites(sim, n):
            Oracle(sim.base_url, sim.api_key).http.post(
                f"/targets/{site}/scans", json={}, headers={"Idempotency-Key": f"iso-{site}"}).raise_for_status()
    assert _sync(worlds.env, "--full-reconcile").returncode == 0  # the queued scans are in the history
    worlds.slow.advance(3600)
    worlds.fast.advance(3600)
    worlds.slow.set_faults(latency_ms=25_000)  # 25 s an answer, as in the report
    try:
        done = subprocess.run([sys.executable, "-c", SENSOR], env=worlds.env, cwd=ROOT, capture_output=True,
                              text=True, timeout=400)
    finally:
        worlds.slow.clear_faults()
    assert done.returncode == 0, done.stderr[-2000:]
    tick = json.loads(done.stdout.strip().splitlines()[-1])
    assert tick["runs"] == ["fast"], tick
    # Dagster stops a sensor tick at 60 s: the whole tick, slow workspace included, ends well before.
    assert tick["seconds"] < 45, tick


def _spans(db: Path | str, since: object) -> dict[str, tuple]:
    return {w: (start, end) for w, start, end in rows(
        db, "SELECT a.workspace_label, min(s.started_at), max(s.finished_at) FROM sync_runs AS s "
            "JOIN accounts AS a USING (workspace_id) WHERE s.started_at > ? GROUP BY a.workspace_label", [since])}


@pytest.mark.parametrize("engine", [ENGINES[0], pytest.param(ENGINES[1], marks=pytest.mark.slow)])
def test_with_dagster_home_the_workspaces_sync_at_once(worlds, engine, request):
    """Into a history of its own on each engine (a first sync of both workspaces). PostgreSQL, which takes every
    writer at once, in the soak only: CI has PostgreSQL's writers of several workspaces at once in
    tests/postgres/test_writers.py, and this case costs two first syncs behind 1.5 s answers."""
    home = worlds.tmp / f"dagster_home_{engine}"
    home.mkdir(exist_ok=True)
    db = BACKENDS[engine].fresh(request, worlds.tmp / f"at-once-{engine}.duckdb")
    since = EPOCH
    worlds.slow.set_faults(latency_ms=1_500)
    try:
        done = _sync({**worlds.env, "DAGSTER_HOME": str(home), "SCANWATCH_DB": db}, "--full-reconcile")
    finally:
        worlds.slow.clear_faults()
    assert done.returncode == 0, done.stderr
    spans = _spans(db, since)
    # The healthy workspace starts before the slow one ends and lands before it: they overlap.
    assert spans["fast"][0] < spans["slow"][1] and spans["fast"][1] < spans["slow"][1], spans
    assert "scanwatch sync: ok (slow, fast)" in done.stdout


SCHEDULE = """
import datetime, json
import dagster as dg
from pipelines.definitions import defs
from pipelines.defs.scheduled_scans import scheduled_scans_job
from pipelines.defs.resources import default_resources
scheduled_scans_schedule = defs().resolve_schedule_def("scheduled_scans_schedule")
when = datetime.datetime(2026, 11, 22, 3, 0, tzinfo=datetime.UTC)
with dg.build_schedule_context(scheduled_execution_time=when, resources=default_resources()) as ctx:
    requests = scheduled_scans_schedule(ctx)
requests = requests if isinstance(requests, list) else [requests]
out = []
for request in requests:
    config = request.run_config
    config["ops"]["start_and_wait_for_scans"]["config"].update(timeout_seconds=0.1, poll_seconds=0.05)
    result = scheduled_scans_job.execute_in_process(run_config=config, resources=default_resources(),
                                                    tags=request.tags)
    out.append({"run_key": request.run_key, "tags": request.tags, "success": result.success,
                "config": config["ops"]["start_and_wait_for_scans"]["config"]})
print(json.dumps(out))
"""


def test_a_scheduled_scan_goes_to_its_own_workspace_with_its_key(worlds):
    before = {name: sim.request_count(key="pro", route="/v1/targets/{target_id}/scans", method="POST")
              for name, sim in (("slow", worlds.slow), ("fast", worlds.fast))}
    done = subprocess.run([sys.executable, "-c", SCHEDULE], env=worlds.env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [run] = json.loads(done.stdout.strip().splitlines()[-1])
    assert run["success"] and run["run_key"] == "fast-20261122T0300" and run["tags"]["scanwatch/workspace"] == "fast"
    assert run["config"]["workspace"] == "fast" and run["config"]["target_ids"] == [worlds.target]
    after = {name: sim.request_count(key="pro", route="/v1/targets/{target_id}/scans", method="POST")
             for name, sim in (("slow", worlds.slow), ("fast", worlds.fast))}
    assert after == {"slow": before["slow"], "fast": before["fast"] + 1}
    with duckdb.connect(worlds.env["SCANWATCH_DB"], read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM scan_request_skips").fetchall() == [(0,)]


THREADS = """
import gc, json, logging
from pipelines.commands.materialize import materialize_all
seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
logging.getLogger("sqlalchemy").addHandler(Keep(level=logging.WARNING))
outcome = materialize_all(console_level="CRITICAL")
gc.collect()  # here, in the main thread: whatever a run's thread left behind is finalized now, at the latest
print(json.dumps({"failed": [p.workspace for p in outcome.parts if not p.success], "logged": seen[:3]}))
"""


MIX = """workspaces:
  - name: healthy
    base_url: {fast}
    api_key_env: SCANWATCH_KEY_FAST
  - name: revoked
    base_url: {fast}
    api_key_env: SCANWATCH_KEY_REVOKED
  - name: down
    base_url: http://127.0.0.1:{closed}/v1
    api_key_env: SCANWATCH_KEY_FAST
  - name: slow
    base_url: {slow}
    api_key_env: SCANWATCH_KEY_SLOW
"""


def test_a_mix_of_slow_down_revoked_and_healthy_workspaces_prints_no_traceback(worlds, tmp_path):
    """Each thread's ephemeral Dagster instance keeps its events in an in-memory SQLite database; one left for
    the garbage collector is closed from whichever thread collects it, and SQLAlchemy then prints a
    traceback ("SQLite objects created in a thread can only be used in that same thread") to the terminal."""
    from tests.prometheus.tools import free_port

    (tmp_path / "mix.yml").write_text(MIX.format(fast=worlds.fast.base_url, slow=worlds.slow.base_url,
                                                 closed=free_port()))
    env = {**worlds.env, "SCANWATCH_WORKSPACES_FILE": str(tmp_path / "mix.yml"),
           "SCANWATCH_KEY_REVOKED": worlds.fast.keys["revoked"], "SCANWATCH_DB": str(tmp_path / "h.duckdb"),
           "SCANWATCH_SNAPSHOT": str(tmp_path / "m.json")}
    worlds.slow.set_faults(latency_ms=3_000)
    try:
        done = subprocess.run([sys.executable, "-c", THREADS], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=400)
    finally:
        worlds.slow.clear_faults()
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"failed": ["revoked", "down"], "logged": []}, result
    assert "Traceback" not in done.stderr


def test_ctrl_c_during_a_dagster_home_sync_is_one_line_and_no_traceback(worlds):
    """Ctrl-C in a terminal signals the whole foreground process group: with DAGSTER_HOME that used to include
    the helpers Dagster starts for each step's logs, which printed a KeyboardInterrupt traceback each."""
    import signal

    home = worlds.tmp / "dagster_home_ctrl_c"
    home.mkdir(exist_ok=True)
    env = {**worlds.env, "DAGSTER_HOME": str(home)}
    worlds.slow.set_faults(latency_ms=2_000)
    worlds.fast.set_faults(latency_ms=2_000)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "sync", "--full-reconcile"], env=env,
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        seen = []
        for line in proc.stderr:  # progress lines: both runs are paging their lists now
            seen.append(line)
            if sum(": 1/" in ln for ln in seen) >= 2:
                break
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does with Ctrl-C
        _, rest = proc.communicate(timeout=300)
    finally:
        worlds.slow.clear_faults()
        worlds.fast.clear_faults()
    stderr = "".join(seen) + rest
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert [ln for ln in stderr.splitlines() if ln.startswith("scanwatch ")] == [
        "scanwatch sync: interrupted; each table keeps its last complete version and the next sync catches up"]
