"""The credential appears nowhere but in the Authorization header: after syncs that met retries and
failures, with Dagster's run and event storage on disk, every place a secret could leak is searched.

Places: every log record at DEBUG from every logger (httpx and httpcore included), the captured stdout and
stderr of the in-process syncs and of the real CLI, exception texts and Dagster's event log, every row of
every DuckDB table and the file's bytes, every file under DAGSTER_HOME (SQLite storages, compute logs),
the snapshot, the exporter's /metrics, the simulator's access log (the URLs it was asked for), and the
resource's repr.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import httpx

from pipelines.commands.materialize import materialize_all
from pipelines.defs.resources import ScanningServiceResource
from simulator.testing import SimConfig, serve_simulator
from tests.reliability.harness import cli, service_env, sync_env


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        self.texts.append(f"{record.name} {text}")


@contextmanager
def every_log_record() -> Iterator[_Records]:
    """Every log record of the process, at every level, while the block runs."""
    records, root = _Records(), logging.getLogger()
    old_level = root.level
    root.addHandler(records)
    root.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        root.removeHandler(records)
        root.setLevel(old_level)


def _secret_forms(key: str) -> list[str]:
    return [key, key[4:]]  # the whole credential, and its secret part without the kind prefix


def _db_texts(db: Path) -> list[str]:
    out = []
    with duckdb.connect(str(db), read_only=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        for (table,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall():
            out += [repr(row) for row in conn.execute(f'SELECT * FROM "{table}"').fetchall()]
    return out


def test_the_credential_appears_nowhere_after_syncs_that_met_errors(tmp_path, capfd, figures):
    home, db = tmp_path / "dagster_home", tmp_path / "history.duckdb"
    home.mkdir()
    texts: list[str] = []
    with every_log_record() as records:
        config = SimConfig(seed=71, scale="small", clock="driven", control=True, rate_limit=100000, access_log=True)
        with serve_simulator(config) as sim:
            key, token = sim.api_key, sim.keys["token_none"]
            # 1. a sync that meets 5xx, malformed and truncated answers and 429s, and gets through
            sim.set_faults(error_rate=0.2, malformed_rate=0.1, truncated_rate=0.1, rate_limit_rate=0.05)
            with sync_env(sim, db, DAGSTER_HOME=str(home)):
                ok = materialize_all()
                sim.set_faults(unavailable_rate=1.0, error_rate=0.0, malformed_rate=0.0, truncated_rate=0.0,
                               rate_limit_rate=0.0, scope="lists")
                # 2. a sync that fails on every retry of a list
                failed = materialize_all()
                sim.clear_faults()
            # 3. a token the service refuses for lack of scope
            with sync_env(sim, db, DAGSTER_HOME=str(home), SCANWATCH_API_KEY=token):
                refused = materialize_all()
            # 4. the real command, with its own output
            done = cli(["sync"], service_env(sim, db, DAGSTER_HOME=str(home)))
            texts += [done.stdout, done.stderr]
            from exporters.server import serve

            server, _thread = serve(db.with_name("scanwatch-metrics.json"), address="127.0.0.1", port=0)
            try:
                texts.append(httpx.get(f"http://127.0.0.1:{server.server_port}/metrics").text)
            finally:
                server.shutdown()
            resource = ScanningServiceResource(base_url=sim.base_url, api_key=key)
            texts += [repr(resource), str(resource), repr(resource.model_dump(exclude={"api_key"}))]
    assert ok.success and not failed.success and not refused.success, (ok.error, failed.error)
    assert done.returncode == 0, done.stderr
    assert ok.metadata and sum(int(m.get("retries", 0)) for m in ok.metadata.values()) > 0, "no error was met"
    captured = capfd.readouterr()
    texts += [captured.out, captured.err, *records.texts]
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        for outcome in (ok, failed, refused):
            texts += [str(outcome.error), repr(outcome.error)]
            texts += [repr(entry) for entry in instance.all_logs(outcome.run_id)]
            texts.append(repr(instance.get_run_by_id(outcome.run_id)))
    texts += _db_texts(db)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in home.rglob("*")), "Dagster kept no storage on disk"
    assert any("GET /v1/projects" in t for t in records.texts), "the simulator's access log was not captured"
    figures["secrets: text sources searched"] += len(texts)
    figures["secrets: files searched"] += len(files)
    leaks = [(i, t[:200]) for i, t in enumerate(texts) for s in (*_secret_forms(key), *_secret_forms(token))
             if s in t]
    leaks += [(str(p), "") for p in files for s in (*_secret_forms(key), *_secret_forms(token))
              if s.encode() in p.read_bytes()]
    figures["secrets: leaks"] += len(leaks)
    assert not leaks, leaks[:5]
    assert "rst_…" in repr(resource) or "rst_\u2026" in repr(resource)
