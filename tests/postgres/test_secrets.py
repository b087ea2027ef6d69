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
import pytest
from dagster._serdes import serialize_value

from pipelines.core.settings import Settings
from pipelines.defs.resources import default_resources
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


ODD = "Ab+9/xYz="  # a common base64 password: '+', '/' and '=' are URL characters
HORSE = "Tr0ub4dor@horse"  # an '@' in the password: libpq cuts the URL at the first one, Python at the last
ODD_FORMS = [ODD, "Ab+9", "xYz=", quote(ODD, safe="")]
HORSE_FORMS = [HORSE, "Tr0ub4dor", "horse", quote(HORSE, safe="")]


def _cli(env: dict[str, str], url: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=ROOT, env={**env, "SCANWATCH_DB": url},
                          capture_output=True, text=True, timeout=timeout)


def _exporter(env: dict[str, str], url: str) -> tuple[int | None, str, str]:
    """The exporter for as long as it takes to start (or to refuse): its return code, stdout and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--port", "0"], cwd=ROOT,
                            env={**env, "SCANWATCH_DB": url}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = proc.stdout.readline()
        if first:  # serving: stopped once its first line is out
            proc.terminate()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode if not first else None, first + out, err


def _in_process(monkeypatch, capsys, env: dict[str, str], url: str, *args: str) -> tuple[int, str, str]:
    """A command that ends before any server is asked (or at its first refusal), run in this process."""
    from pipelines.cli import main

    for key in [k for k in os.environ if k.startswith(("SCANWATCH_", "DAGSTER_", "PG"))]:
        monkeypatch.delenv(key)
    for key, value in {**env, "SCANWATCH_DB": url}.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_password_with_url_characters_appears_nowhere(pg_server, pg_database, tmp_path, monkeypatch, capsys):
    """Passwords a URL cannot carry as they are (`Ab+9/xYz=`, `Tr0ub4dor@horse`) given raw, percent-encoded, as a
    query parameter and as keyword/value settings, to `sync`, `sql`, the exporter and `dagster job execute`:
    each either works or says in one line what to fix, and the password (and every piece a parser could cut
    from it, such as the `horse` libpq would resolve as a host) appears in no output, log, file of Dagster's
    storage or row of the history."""
    db = pg_database.rsplit("/", 1)[1]
    pg_server.psql(f"CREATE ROLE odd LOGIN PASSWORD '{ODD}'; CREATE ROLE horse_user LOGIN PASSWORD '{HORSE}'; "
                   f'GRANT ALL ON DATABASE "{db}" TO odd, horse_user')
    pg_server.psql("GRANT ALL ON SCHEMA public TO odd, horse_user", database=db)
    host = f"127.0.0.1:{pg_server.port}/{db}"
    raw_odd, raw_horse = f"postgresql://odd:{ODD}@{host}", f"postgresql://horse_user:{HORSE}@{host}"
    good = f"postgresql://horse_user:{quote(HORSE, safe='')}@{host}"
    wrong = f"postgresql://odd:{quote(ODD[::-1], safe='')}@{host}"
    in_query = f"postgresql://odd@{host}?sslmode=disable&password={quote(ODD, safe='')}"
    conninfo = f"host=127.0.0.1 port={pg_server.port} user=odd password='{ODD}' dbname={db}"
    home = tmp_path / "dagster_home"
    home.mkdir()
    texts: list[str] = []
    with every_log_record() as records, serve_simulator(SimConfig(seed=74, scale="small", clock="driven",
                                                                 control=True, rate_limit=100000)) as sim:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_", "PG"))}
        env.update(SCANWATCH_BASE_URL=sim.base_url, SCANWATCH_API_KEY=sim.api_key, DAGSTER_HOME=str(home),
                   PYTHONPATH=str(ROOT), HOME=str(tmp_path))
        # The encoded URL opens the history (a successful sync with such a password is the test above); a
        # revoked key (401) then fails the sync, recorded in sync_runs, its key nowhere.
        revoked = sim.keys["revoked"]
        code, out, err = _in_process(monkeypatch, capsys, {**env, "SCANWATCH_API_KEY": revoked}, good, "sync")
        assert code == 1 and "failed in account" in err, err
        texts += [out, err]
        pg_server.psql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO odd", database=db)
        code, out, err = _in_process(monkeypatch, capsys, env, in_query, "sql", "SELECT count(*) AS n FROM sync_runs",
                                     "--format", "csv")
        assert code == 0 and out.split()[0] == "n" and int(out.split()[1]) > 0, err
        texts += [out, err]
        refused = []
        for url, args in ((raw_odd, ["sync"]), (raw_odd, ["sql", "SELECT 1"]), (raw_horse, ["sync"]),
                          (raw_horse, ["sql", "SELECT 1"]), (raw_odd, ["sql", "SELECT 1", "--db", raw_horse]),
                          (raw_odd, ["exporter", "--port", "0"]), (raw_horse, ["exporter", "--port", "0"]),
                          (conninfo, ["sql", "SELECT 1"]), (conninfo, ["sync"]), (wrong, ["sync"]),
                          (wrong, ["sql", "SELECT 1"])):
            code, out, err = _in_process(monkeypatch, capsys, env, url, *args)
            texts += [out, err]
            lines = [ln for ln in err.splitlines() if ln.strip()]
            assert code in (1, 2) and len(lines) == 1 and "Traceback" not in err, (url, err)
            refused.append(lines[0])
        assert all("percent-encode the password" in line for line in refused[:7]), refused
        assert all("keyword/value" in line for line in refused[7:9]), refused
        assert all("refused the password" in line for line in refused[9:]), refused
        served = _exporter(env, good)
        assert served[0] is None and "snapshot_parts" in served[1], served
        texts += served[1:]
        # The code location under Dagster's own command, refused while loading; a run whose steps fail.
        done = subprocess.run([str(Path(sys.executable).parent / "dagster"), "job", "execute", "-m",
                               "pipelines.definitions", "-j", "sync_job"], cwd=ROOT,
                              env={**env, "SCANWATCH_DB": raw_horse}, capture_output=True, text=True, timeout=300)
        assert done.returncode != 0 and "percent-encode the password" in done.stdout + done.stderr
        texts += [done.stdout, done.stderr]
        monkeypatch.setenv("SCANWATCH_DB", wrong)
        failed = sync_history()
        assert not failed.success
        texts += [repr(event) for event in failed.all_events]
    # libpq's own reading of an unencoded '@', past the check that refuses it: the host it fails to resolve is
    # a piece of the password, and the line says so without it.
    from pipelines.core.history_location import HistoryLocation
    from pipelines.storage import HistoryUnavailableError
    from pipelines.storage.destinations.impl.postgres.factory import POSTGRES

    with pytest.raises(HistoryUnavailableError) as caught:
        POSTGRES.open(HistoryLocation(raw_horse))
    assert "failed to resolve host" in str(caught.value) and "***" in str(caught.value)
    texts += [str(caught.value), *records.texts]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert any(run.status == dg.DagsterRunStatus.FAILURE for run in runs)
        for run in runs:
            texts += [repr(entry) for entry in instance.all_logs(run.run_id)]
    history = _history_texts(good)
    assert any("401" in t for t in history), "the revoked key's failure was not recorded"
    texts += history
    forms = [*ODD_FORMS, *HORSE_FORMS, revoked[4:]]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    leaks = [(t[:300], s) for t in texts for s in forms if s in t]
    leaks += [(str(p), s) for p in files for s in forms if s.encode() in p.read_bytes()]
    assert not leaks, leaks[:5]
