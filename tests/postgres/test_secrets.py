"""The PostgreSQL history's password appears nowhere: after real syncs (one through, others refused: a wrong
password, an unreachable server) with Dagster's run and event storage on disk, every place it could leak is
searched.

Places: every log record at DEBUG from every logger, the captured output of the in-process syncs and of the
real CLI (`scanwatch sync`, `scanwatch sql`), Dagster's event log and run records, every file under
DAGSTER_HOME (SQLite storages, compute logs), every row of every table of the history (sync_runs' errors
included, what /metrics' pipeline health is built from), and the resources' and settings' reprs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import dagster as dg
from dagster._serdes import serialize_value

from pipelines.resources import default_resources
from pipelines.settings import Settings
from simulator.testing import SimConfig, serve_simulator
from tests.backends import reader, sync_history
from tests.reliability.test_secrets import every_log_record

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "Pw+with/odd chars%41"  # what a URL must percent-encode, and the decoded form differs


def _history_texts(url: str) -> list[str]:
    out = []
    with reader(url) as conn:
        tables = conn.execute("SELECT table_name FROM information_schema.tables "
                              "WHERE table_schema = current_schema()").fetchall()
        for (table,) in tables:
            out += [repr(row) for row in conn.execute(f'SELECT * FROM "{table}"').fetchall()]
    return out


def test_the_password_appears_nowhere_after_real_syncs(pg_server, pg_database, tmp_path, capfd, monkeypatch):
    db = pg_database.rsplit("/", 1)[1]
    pg_server.psql(f"CREATE ROLE writer LOGIN PASSWORD '{PASSWORD}'; GRANT ALL ON DATABASE \"{db}\" TO writer")
    pg_server.psql("GRANT ALL ON SCHEMA public TO writer", database=db)
    host = f"127.0.0.1:{pg_server.port}/{db}"
    good = f"postgresql://writer:{quote(PASSWORD, safe='')}@{host}"
    wrong = f"postgresql://writer:{quote(PASSWORD[::-1], safe='')}@{host}"
    unreachable = f"postgresql://writer:{quote(PASSWORD, safe='')}@127.0.0.1:1/{db}"
    secrets = [PASSWORD, quote(PASSWORD, safe=""), PASSWORD[::-1], quote(PASSWORD[::-1], safe="")]
    home = tmp_path / "dagster_home"
    home.mkdir()
    texts: list[str] = []
    results = []
    with every_log_record() as records, serve_simulator(SimConfig(seed=73, scale="small", clock="driven",
                                                                control=True, rate_limit=100000)) as sim:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
        env.update(SCANWATCH_BASE_URL=sim.base_url, SCANWATCH_API_KEY=sim.api_key, DAGSTER_HOME=str(home),
                   PYTHONPATH=str(ROOT))
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        for url in (good, wrong, unreachable):
            monkeypatch.setenv("SCANWATCH_DB", url)
            results.append(sync_history())
            texts += [repr(default_resources(Settings.load())["history"]), repr(Settings.load())]
        for url, args in ((good, ["sync"]), (wrong, ["sync"]), (good, ["sql", "SELECT pg_read_file('x')"]),
                          (wrong, ["sql", "SELECT 1"]), (unreachable, ["sql", "SELECT 1"])):
            done = subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=ROOT,
                                  env={**env, "SCANWATCH_DB": url}, capture_output=True, text=True, timeout=300)
            texts += [done.stdout, done.stderr]
    ok, refused, lost = results
    assert ok.success and not refused.success and not lost.success
    captured = capfd.readouterr()
    texts += [captured.out, captured.err, *records.texts]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for result in results:
            texts += [repr(entry) for entry in instance.all_logs(result.run_id)]
            run = instance.get_run_by_id(result.run_id)
            texts.append(repr(run))
            # Run storage keeps each job's snapshot (config schema, resources' given values as its defaults)
            # compressed; serialized here so a URL held by a resource would be found.
            texts.append(serialize_value(instance.get_job_snapshot(run.job_snapshot_id)))
            texts.append(serialize_value(instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)))
            texts += [repr(event) for event in result.all_events]
    texts += _history_texts(pg_database)
    assert any("writer" in t and "***" in t for t in texts), "no masked URL was ever shown"
    assert any("refused the password" in t for t in texts)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in home.rglob("*")), "Dagster kept no storage on disk"
    leaks = [(i, t[:300]) for i, t in enumerate(texts) for s in secrets if s in t]
    leaks += [(str(p), "") for p in files for s in secrets if s.encode() in p.read_bytes()]
    assert not leaks, leaks[:5]
