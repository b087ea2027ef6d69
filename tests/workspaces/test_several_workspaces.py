"""Several workspaces in one deployment, over real HTTP: `scanwatch sync` and `scanwatch exporter` as a
user runs them, against a simulator serving independent Pro workspaces, each with its own key and world."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.e2e.stack import ROOT, Process, poll
from tests.ingest.conftest import Oracle, query
from tests.reliability import forked
from tests.service_truth import mismatches, walk
from tests.workspaces.pair import sync_in_its_own_session

pytestmark = pytest.mark.timeout(600)

FILE = """workspaces:
  - name: acme
    api_key_env: SCANWATCH_KEY_ACME
  - name: beta
    api_key_env: SCANWATCH_KEY_BETA
  - name: gamma
    base_url: {base_url}
    api_key_env: SCANWATCH_KEY_GAMMA
"""


@pytest.fixture(scope="module")
def sim() -> Iterator:
    with serve_simulator(SimConfig(seed=5, scale="small", clock="driven", control=True, rate_limit=100000,
                                   pro_workspaces=2)) as s:
        yield s


@pytest.fixture(scope="module")
def deployment(sim, tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("workspaces")
    (tmp / "workspaces.yml").write_text(FILE.format(base_url=sim.base_url))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_") and k != "DAGSTER_HOME"}
    env.update({
        "SCANWATCH_WORKSPACES_FILE": str(tmp / "workspaces.yml"), "SCANWATCH_BASE_URL": sim.base_url,
        "SCANWATCH_KEY_ACME": sim.keys["pro"], "SCANWATCH_KEY_BETA": sim.keys["pro_2"],
        "SCANWATCH_KEY_GAMMA": sim.keys["revoked"],
        "SCANWATCH_DB": str(tmp / "history.duckdb"), "SCANWATCH_SNAPSHOT": str(tmp / "metrics.json"),
    })
    return env


def _sync(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return forked.run(["sync", "--quiet", *args], env, timeout=300, cwd=ROOT)


@pytest.fixture(scope="module")
def first_sync(deployment) -> subprocess.CompletedProcess:
    return _sync(deployment)


def _ids(db: Path, sql: str) -> set[str]:
    return {r[0] for r in query(db, sql)}


def test_a_revoked_key_fails_its_workspace_alone_in_one_line(sim, first_sync):
    """Mutation that fails it (and passed the former check, which looked for `rst_` only after the variable's
    name): the failure line ending with the refused credential (`... ({the key})`)."""
    assert first_sync.returncode == 1
    lines = first_sync.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("scanwatch sync: workspace gamma failed in account"), lines
    output = first_sync.stdout + first_sync.stderr
    for key in ("revoked", "pro", "pro_2"):  # the refused key, and the healthy ones, appear nowhere
        assert sim.keys[key] not in output, key
    assert re.match(r"scanwatch sync: ok \(acme, beta\) in ", first_sync.stdout), first_sync.stdout


def test_a_revoked_key_is_in_no_column_of_the_history(sim, deployment, first_sync):
    """The 401 is recorded (`sync_runs.error` of gamma's failed steps, what /metrics' pipeline health reads),
    and the refused key is in no text column of any table, nor in the command's output."""
    db = Path(deployment["SCANWATCH_DB"])
    key = sim.keys["revoked"]
    assert key.startswith("rst_")
    errors = query(db, "SELECT error FROM sync_runs WHERE workspace_label = 'gamma' AND status = 'failure'")
    assert errors and all("401" in e or "revoked" in e for (e,) in errors), errors
    from tests.backends import reader

    with reader(db) as conn:
        columns = conn.execute("SELECT table_name, column_name FROM information_schema.columns WHERE data_type IN "
                               "('VARCHAR', 'JSON') AND table_schema = current_schema()").fetchall()
        assert ("sync_runs", "error") in columns
        found = [(t, c) for t, c in columns if conn.execute(
            f'SELECT count(*) FROM "{t}" WHERE strpos(CAST("{c}" AS VARCHAR), ?) > 0', [key[4:]]).fetchone()[0]]
    assert not found, found
    assert key[4:] not in first_sync.stdout + first_sync.stderr


def test_each_healthy_workspace_is_fully_synced_under_its_own_id(sim, deployment, first_sync):
    db = Path(deployment["SCANWATCH_DB"])
    bound = dict(query(db, "SELECT workspace_label, workspace_id FROM accounts"))
    assert bound == {"acme": sim.world.pro_workspace_ids[0], "beta": sim.world.pro_workspace_ids[1]}
    for name, key in (("acme", "pro"), ("beta", "pro_2")):
        truth = Oracle(sim.base_url, sim.keys[key]).state()
        wid = bound[name]
        assert _ids(db, f"SELECT id FROM issues WHERE workspace_id = '{wid}'") == {
            i["id"] for i in truth.all_issues()}
        assert _ids(db, f"SELECT id FROM scans WHERE workspace_id = '{wid}'") == {
            s["id"] for rows in truth.scans.values() for s in rows}
        assert _ids(db, f"SELECT id FROM projects WHERE workspace_id = '{wid}'") == {
            p["id"] for p in truth.projects}
    # Nothing under any other id, and no id twice.
    for table in ("projects", "targets", "scans", "issues", "issue_events", "score_snapshots"):
        assert _ids(db, f"SELECT DISTINCT workspace_id FROM {table}") == set(bound.values()), table
    assert query(db, "SELECT count(*) - count(DISTINCT id) FROM issues") == [(0,)]


def test_metrics_carry_the_healthy_workspaces_and_the_failed_ones_health(deployment, first_sync, tmp_path):
    import urllib.request

    exporter = Process("exporter", [sys.executable, "-m", "pipelines.cli", "exporter", "--port", "0",
                                    "--listen-address", "127.0.0.1"], tmp_path, deployment)
    try:
        line = poll("the exporter's start line", lambda: re.search(r"(http://\S+/metrics)", exporter.tail()))
        text = poll("a scrape", lambda: urllib.request.urlopen(line.group(1), timeout=5).read().decode())
    finally:
        exporter.stop()
    for name in ("acme", "beta"):
        assert re.search(rf'secscan_issues_open\{{[^}}]*workspace="{name}"', text), name
        assert re.search(rf'secscan_sync_last_success_timestamp_seconds\{{workspace="{name}"\}} \d', text), name
        assert re.search(rf'secscan_pipeline_last_run_success\{{asset="issues",workspace="{name}"\}} 1\.0', text)
    assert re.search(r'secscan_pipeline_last_run_success\{asset="account",workspace="gamma"\} 0\.0', text)
    assert re.search(r'secscan_pipeline_runs_total\{asset="account",status="failure",workspace="gamma"\} 1\.0', text)
    assert deployment["SCANWATCH_KEY_ACME"] not in text and deployment["SCANWATCH_KEY_GAMMA"] not in text


def test_one_workspace_can_be_synced_alone(deployment, first_sync):
    db = Path(deployment["SCANWATCH_DB"])
    before = query(db, "SELECT workspace_label, count(*) FROM sync_runs GROUP BY ALL ORDER BY 1")
    done = _sync(deployment, "--workspace", "beta")
    assert done.returncode == 0 and done.stdout.startswith("scanwatch sync: ok in "), done.stdout + done.stderr
    after = dict(query(db, "SELECT workspace_label, count(*) FROM sync_runs GROUP BY ALL"))
    assert after["beta"] > dict(before)["beta"] and after["acme"] == dict(before)["acme"]
    unknown = _sync(deployment, "--workspace", "nope")
    assert unknown.returncode == 2 and "no workspace named 'nope'" in unknown.stderr


def test_a_key_pointed_at_another_workspace_is_refused_and_writes_nothing(sim, deployment, first_sync):
    db = Path(deployment["SCANWATCH_DB"])
    counts = query(db, "SELECT workspace_id, count(*) FROM issues GROUP BY ALL ORDER BY 1")
    swapped = {**deployment, "SCANWATCH_KEY_ACME": sim.keys["pro_2"], "SCANWATCH_KEY_BETA": sim.keys["pro"]}
    done = _sync(swapped, "--workspace", "acme")
    assert done.returncode == 1
    line = done.stderr.strip()
    assert "workspace acme: its key now answers for workspace 'Pro Workspace 2'" in line and "\n" not in line
    assert query(db, "SELECT workspace_id, count(*) FROM issues GROUP BY ALL ORDER BY 1") == counts
    bound = dict(query(db, "SELECT workspace_label, workspace_id FROM accounts"))
    assert bound["acme"] == sim.world.pro_workspace_ids[0]


def _sql(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return forked.run(["sql", *args, "--format", "json"], env, timeout=120, cwd=ROOT)


def test_sql_and_the_cookbook_honour_the_workspace(sim, deployment, first_sync):
    import json

    db = Path(deployment["SCANWATCH_DB"])
    bound = dict(query(db, "SELECT workspace_label, workspace_id FROM accounts"))
    everything = json.loads(_sql(deployment, "open_issues_by_project").stdout)
    per_workspace = {}
    for name in ("acme", "beta"):
        done = _sql(deployment, "open_issues_by_project", "--workspace", name)
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)
        projects = _ids(db, f"SELECT id FROM projects WHERE workspace_id = '{bound[name]}'")
        assert rows and {r["project_id"] for r in rows} <= projects
        per_workspace[name] = rows
        seen = json.loads(_sql(deployment, "SELECT DISTINCT workspace_id FROM issues", "--workspace", name).stdout)
        assert seen == [{"workspace_id": bound[name]}]
        health = json.loads(_sql(deployment, "SELECT DISTINCT workspace_label FROM sync_runs WHERE asset = 'issues'",
                                 "--workspace", name).stdout)
        assert health == [{"workspace_label": name}]
    assert len(per_workspace["acme"]) + len(per_workspace["beta"]) == len(everything)
    gamma = json.loads(_sql(deployment, "SELECT count(*) AS n FROM sync_runs", "--workspace", "nope").stdout or "[]")
    assert gamma == []
    refused = _sql(deployment, "sla_breaches", "--workspace", "nope")
    assert refused.returncode == 1
    assert "no workspace named 'nope' in the history; it holds: acme, beta" in refused.stderr


AUTOMATION = """
import json, datetime
import dagster as dg
from pipelines.definitions import defs
from pipelines.defs.resources import default_resources
from pipelines.defs.sensors import scan_finished_sensor
from pipelines.defs.partitions import WORKSPACES

schedule = defs().resolve_schedule_def("refresh_schedule")
when = datetime.datetime(2026, 11, 1, 12, 15, tzinfo=datetime.UTC)
with dg.instance_for_test() as instance:
    with dg.build_schedule_context(scheduled_execution_time=when, instance=instance,
                                   resources=default_resources()) as ctx:
        ticks = schedule(ctx)
    with dg.build_sensor_context(resources=default_resources(), instance=instance) as ctx:
        polled = scan_finished_sensor(ctx)
    partitions = WORKSPACES.get_partition_keys(dynamic_partitions_store=instance)
print(json.dumps({
    "partitions": partitions,
    "schedule": [[r.partition_key, r.run_key] for r in ticks],
    "sensor": [[r.partition_key, r.run_config["ops"]["issues"]["config"]["project_ids"]] for r in polled]
              if isinstance(polled, list) else polled.skip_message,
}))
"""


def test_schedules_and_the_sensor_cover_every_workspace(sim, deployment, first_sync):
    import json

    from tests.ingest.conftest import Oracle

    # A scan started in acme's world is queued in the history after a sync of acme, then finishes.
    oracle = Oracle(sim.base_url, sim.keys["pro"])
    target = oracle.walk("/projects")[0]["targets"][0]
    oracle.http.post(f"/targets/{target['id']}/scans", json={},
                     headers={"Idempotency-Key": "ws-sensor-1"}).raise_for_status()
    assert _sync(deployment, "--workspace", "acme", "--full-reconcile").returncode == 0
    sim.advance(3600)
    done = subprocess.run([sys.executable, "-c", AUTOMATION], env=deployment, cwd=ROOT, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["partitions"] == ["acme", "beta", "gamma"]
    assert seen["schedule"] == [[n, f"{n}-20261101T1215"] for n in ("acme", "beta", "gamma")]
    # Only acme had a queued scan; beta has none and gamma's key is refused: neither holds acme back.
    assert seen["sensor"] == [["acme", [target["project_id"]]]]


def test_scanwatch_workspaces_lists_the_followed_and_the_removed_with_their_state(sim, deployment, first_sync,
                                                                                 tmp_path):
    """The file now follows acme with its key in a file (as a mounted Secret gives it) and gamma, and no longer
    beta: acme and gamma show their last runs, beta shows as removed with its history kept; no key shows."""
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "acme").write_text(deployment["SCANWATCH_KEY_ACME"] + "\n")
    (tmp_path / "workspaces.yml").write_text(
        "workspaces:\n  - name: acme\n  - name: gamma\n    api_key_env: SCANWATCH_KEY_GAMMA\n")
    env = {**deployment, "SCANWATCH_WORKSPACES_FILE": str(tmp_path / "workspaces.yml"),
           "SCANWATCH_KEYS_DIR": str(keys), "SCANWATCH_KEY_ACME": ""}
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "workspaces", "--format", "tsv"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {line.split("\t")[0]: line.split("\t") for line in done.stdout.strip().splitlines()[1:]}
    assert set(rows) == {"acme", "beta", "gamma"}
    assert rows["acme"][1:3] == ["followed", f"the key file {keys / 'acme'}"]
    assert rows["acme"][4] != "-" and rows["acme"][5] == "success"
    assert rows["gamma"][1:3] == ["followed", "SCANWATCH_KEY_GAMMA"] and rows["gamma"][5] == "failure"
    assert rows["beta"][1] == "removed: history kept, not polled" and rows["beta"][5] == "success"
    assert all(deployment[k] not in done.stdout + done.stderr
               for k in ("SCANWATCH_KEY_ACME", "SCANWATCH_KEY_BETA", "SCANWATCH_KEY_GAMMA"))


def test_with_dagster_home_the_summary_still_reaches_the_terminal(deployment, first_sync, tmp_path):
    # Runs recorded in DAGSTER_HOME capture each step's output; the summary must still reach the terminal
    # (the demo's banner once showed an empty sync line), and a failed workspace must not stop the others.
    home = tmp_path / "dagster_home"
    home.mkdir()
    done, left = sync_in_its_own_session({**deployment, "DAGSTER_HOME": str(home)})
    assert done.returncode == 1
    # Each run's process, and the fork server they were forked from, are gone once the command has exited.
    assert not left, left
    assert re.match(r"scanwatch sync: ok \(acme, beta\) in ", done.stdout), (done.stdout, done.stderr)
    assert done.stderr.strip().splitlines()[-1].startswith("scanwatch sync: workspace gamma failed in account")
    # Dagster's run list names the job a CLI sync ran, as it names a schedule's (not `__ephemeral_asset_job__`).
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
    assert sorted((r.job_name, r.tags.get("dagster/partition"), r.tags.get("scanwatch/trigger")) for r in runs) == [
        ("sync_job", name, "cli") for name in ("acme", "beta", "gamma")]


RATE_LIMIT, RATE_WINDOW = 4, 2.0  # per key; a first sync of one small workspace needs about 15 requests


def test_rate_limited_workspaces_sync_at_once_each_within_its_own_keys_budget(tmp_path):
    """The service's limit is per key. Two rate-limited workspaces synced at once each stay within their own
    key's budget (no 429, never more than the limit in a window), and together they spend more than one key's
    budget in a window: a sync that treated the keys as one budget could not.

    Mutation that fails it: the pacer shared by every key of a base URL (`shared_pacer` keyed without the
    key's digest)."""
    hits: list[tuple[str, int, bool]] = []
    with serve_simulator(SimConfig(seed=5, scale="small", clock="driven", control=True, rate_limit=RATE_LIMIT,
                                   rate_window=RATE_WINDOW, pro_workspaces=2)) as sim:
        limiter = sim.rt.limiter
        real_hit = limiter.hit

        def counted(secret: str):  # the service's own count of each key's window
            decision = real_hit(secret)
            hits.append((secret, int(time.time() // RATE_WINDOW), decision.allowed))
            return decision

        limiter.hit = counted
        (tmp_path / "workspaces.yml").write_text("workspaces:\n  - name: acme\n    api_key_env: SCANWATCH_KEY_ACME\n"
                                                 "  - name: beta\n    api_key_env: SCANWATCH_KEY_BETA\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_") and k != "DAGSTER_HOME"}
        env.update({"SCANWATCH_WORKSPACES_FILE": str(tmp_path / "workspaces.yml"), "SCANWATCH_BASE_URL": sim.base_url,
                    "SCANWATCH_KEY_ACME": sim.keys["pro"], "SCANWATCH_KEY_BETA": sim.keys["pro_2"],
                    "SCANWATCH_DB": str(tmp_path / "history.duckdb")})
        done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sync"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert re.search(r"scanwatch sync: ok \(acme, beta\) in .*, 0 rate-limited answers", done.stdout), done.stdout
        keys = {sim.keys["pro"]: "acme", sim.keys["pro_2"]: "beta"}
        assert {keys.get(s) for s, _, _ in hits} == {"acme", "beta"}
        assert all(allowed for _, _, allowed in hits), "a key went over its budget"
        per_window = Counter((keys[s], w) for s, w, _ in hits)
        assert max(per_window.values()) <= RATE_LIMIT
        both = Counter(w for _, w, _ in hits)
        assert max(both.values()) > RATE_LIMIT, sorted(per_window.items())  # two budgets spent at once
        db = tmp_path / "history.duckdb"
        for name, key in (("acme", "pro"), ("beta", "pro_2")):  # and each history is whole
            truth = walk(sim.base_url, sim.keys[key])
            with duckdb.connect(str(db), read_only=True) as conn:
                assert mismatches(conn, truth) == [], name


BATCHES = """
import datetime, json
import dagster as dg
from pipelines.definitions import defs
from pipelines.defs.resources import default_resources

d = defs()
schedule = d.resolve_schedule_def("refresh_schedule")
when = datetime.datetime(2026, 11, 1, 12, 15, tzinfo=datetime.UTC)
with dg.DagsterInstance.get() as instance:  # DAGSTER_HOME: the deployment's instance file, on PostgreSQL
    with dg.build_schedule_context(scheduled_execution_time=when, instance=instance,
                                   resources=default_resources()) as ctx:
        requests = schedule(ctx)
    batch = d.resolve_job_def("batch_job")
    ok = [batch.execute_in_process(run_config=r.run_config, instance=instance, tags=r.tags).success
          for r in requests]
    runs = sorted([r.tags.get("dagster/partition"), r.status.value] for r in instance.get_runs()
                  if r.job_name == "refresh_job")
    materialized = sorted(instance.get_materialized_partitions(dg.AssetKey("issues")))
print(json.dumps({"job": schedule.job_name,
                  "requests": [r.run_config["ops"]["refresh_batch"]["config"]["workspaces"] for r in requests],
                  "batches_ok": ok, "runs": runs, "materialized": materialized}))
"""


def _connections(url: str) -> int:
    """Connections opened so far to the database at `url` (PostgreSQL's own count), read again until the
    ended ones' statistics are all in."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    seen = -1
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            count = conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", [name]).fetchone()[0]
            if count == seen:
                return count
            seen = count
            time.sleep(0.5)


def test_a_batched_tick_costs_a_run_per_batch_and_a_failing_workspace_fails_alone(deployment, pg_database,
                                                                                   tmp_path, monkeypatch):
    """With SCANWATCH_REFRESH_BATCH=2, three workspaces are two runs of the batch job, not three runs; each
    workspace is still a run of its own with its partition: gamma's revoked key fails gamma's run alone, and
    Dagster holds acme's and beta's partitions as materialized. On the deployment's instance (Dagster's
    storage in PostgreSQL), a batch's worker keeps its connections to Dagster's database for its runs: a
    workspace's run opened 231 of them, one per statement, when each worker made the instance again and
    Dagster's storages kept none (docs/benchmarks.md, "A thousand workspaces")."""
    import json
    import shutil
    from urllib.parse import unquote, urlsplit

    import dagster as dg

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster" / "dagster.yaml", home / "dagster.yaml")
    parts = urlsplit(pg_database)
    env = {**deployment, "SCANWATCH_REFRESH_BATCH": "2", "SCANWATCH_DB": str(tmp_path / "history.duckdb"),
           "SCANWATCH_SNAPSHOT": str(tmp_path / "snapshot"), "DAGSTER_HOME": str(home),
           "DAGSTER_PG_HOST": parts.hostname or "", "DAGSTER_PG_PORT": str(parts.port),
           "DAGSTER_PG_USER": unquote(parts.username or ""), "DAGSTER_PG_PASSWORD": unquote(parts.password or ""),
           "DAGSTER_PG_DB": parts.path.lstrip("/")}
    for key in ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB"):
        monkeypatch.setenv(key, env[key])
    with dg.DagsterInstance.from_config(str(home)):  # Dagster's tables made before the count starts
        pass
    before = _connections(pg_database)
    done = subprocess.run([sys.executable, "-c", BATCHES], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    opened = _connections(pg_database) - before  # this test's own few reads among them
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["job"] == "batch_job" and got["requests"] == [["acme", "beta"], ["gamma"]]
    assert got["batches_ok"] == [True, True]
    assert got["runs"] == [["acme", "SUCCESS"], ["beta", "SUCCESS"], ["gamma", "FAILURE"]]
    assert got["materialized"] == ["acme", "beta"]
    # 118 here: the schedule's evaluation and the two batch runs' own (their process's instance opens a
    # connection a statement) about 100, each workspace's run a few; 736 when each of its statements opened one.
    assert opened < 60 * 3, f"{opened} connections to Dagster's database for three workspaces' runs"
