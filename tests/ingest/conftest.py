"""Ingestion tests run the real assets, in-process through Dagster, against the simulator over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.oracle import Oracle  # the one independent reader, shared with the benchmarks
from simulator.testing import SimConfig, serve_simulator

__all__ = ["Oracle", "exposition", "query", "requests_of", "run_sync"]


@pytest.fixture
def sim() -> Iterator:
    with serve_simulator(SimConfig(seed=11, scale="small", clock="driven", control=True, rate_limit=100000)) as s:
        yield s


@pytest.fixture
def env(sim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "history.duckdb"
    monkeypatch.setenv("SCANWATCH_BASE_URL", sim.base_url)
    monkeypatch.setenv("SCANWATCH_API_KEY", sim.api_key)
    monkeypatch.setenv("SCANWATCH_DB", str(db))
    monkeypatch.delenv("SCANWATCH_SNAPSHOT", raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return db


@pytest.fixture
def engine_env(sim, engine_db: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """`env` on each engine (`engine_db`): the history a DuckDB file or a PostgreSQL database, the snapshot where
    each engine keeps it by default (a folder beside the file; the database's `snapshot_parts`)."""
    from tests.backends import point_at

    point_at(monkeypatch, sim, engine_db)
    return engine_db


@pytest.fixture
def scheduled_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple]:
    """(simulator, history) for the scheduled-scan suites: scans end at once, a first sync is done."""
    from tests.ingest.scheduled import synced_world

    with synced_world(tmp_path, monkeypatch) as sim_db:
        yield sim_db


def run_sync(**kw):
    from pipelines.commands.materialize import materialize_all

    return materialize_all(**kw)


def requests_of(outcome) -> int:
    return sum(int(m.get("requests", 0)) for m in outcome.metadata.values())


def query(db: Path | str, sql: str) -> list[tuple]:
    """`sql` on the history, a DuckDB file (read-only) or a PostgreSQL database, in UTC."""
    from tests.backends import rows

    return rows(db, sql)


def exposition(db: Path | str) -> str:
    """What `/metrics` serves from the last snapshot of the history `db`, read where the exporter reads it by
    default (`exporters/cli.py`): the folder beside a DuckDB file, a PostgreSQL history's `snapshot_parts`."""
    from prometheus_client import generate_latest

    from tests.helpers import build_registry, served_snapshot

    with served_snapshot(db) as snapshot:
        return generate_latest(build_registry(snapshot)).decode()


