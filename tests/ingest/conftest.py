"""Ingestion tests run the real assets, in-process through Dagster, against the simulator over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from benchmarks.oracle import Oracle  # the one independent reader, shared with the benchmarks
from simulator.testing import SimConfig, serve_simulator

__all__ = ["Oracle", "query", "requests_of", "run_sync"]


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
def scheduled_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple]:
    """(simulator, history) for the scheduled-scan suites: scans end at once, a first sync is done."""
    from tests.ingest.scheduled import synced_world

    with synced_world(tmp_path, monkeypatch) as sim_db:
        yield sim_db


def run_sync(**kw):
    from pipelines.materialize import materialize_all

    return materialize_all(**kw)


def requests_of(outcome) -> int:
    return sum(int(m.get("requests", 0)) for m in outcome.metadata.values())


def query(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return conn.execute(sql).fetchall()


