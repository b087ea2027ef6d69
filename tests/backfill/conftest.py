"""Backfill tests run a real first sync against the simulator over HTTP, then reconstruct from its history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.testing import SimConfig, serve_simulator


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, object]]:
    """A history after one first sync of the small world (driven clock), and the simulator still serving."""
    from pipelines.materialize import materialize_all

    db = tmp_path_factory.mktemp("backfill") / "history.duckdb"
    with serve_simulator(SimConfig(seed=11, scale="small", clock="driven", rate_limit=100000)) as sim, \
            pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCANWATCH_BASE_URL", sim.base_url)
        mp.setenv("SCANWATCH_API_KEY", sim.api_key)
        mp.setenv("SCANWATCH_DB", str(db))
        mp.delenv("SCANWATCH_SNAPSHOT", raising=False)
        mp.delenv("DAGSTER_HOME", raising=False)
        outcome = materialize_all(console_level="CRITICAL")
        assert outcome.success, outcome.error
        yield db, sim
