"""Backfill tests run a real first sync against the simulator over HTTP, then reconstruct from its history: in a
DuckDB file and in a PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.backends import BACKENDS, point_at


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def synced(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path | str,
                                                                                                          object]]:
    """A history after one first sync of the small world (driven clock), and the simulator still serving: a
    DuckDB file's path, or a PostgreSQL database's URL."""
    db: Path | str = BACKENDS[request.param].fresh(request, tmp_path_factory.mktemp("backfill") / "history.duckdb")
    with serve_simulator(SimConfig(seed=11, scale="small", clock="driven", rate_limit=100000)) as sim, \
            pytest.MonkeyPatch.context() as mp:
        point_at(mp, sim, db)
        _first_sync_without_snapshot()
        yield db, sim


def _first_sync_without_snapshot() -> None:
    """Every ingestion asset of a first sync, then its last step's reconstruction (`metrics_snapshot` rebuilds
    the days before a workspace's first sync before it writes the snapshot), on the history of SCANWATCH_DB."""
    from pipelines.backfill.reconstruct import reconstruct
    from pipelines.core.settings import Settings
    from pipelines.storage.db import connect
    from tests.backends import failure, sync_history

    result = sync_history()
    assert result.success, failure(result)
    with connect(Settings.load().history) as conn:
        assert reconstruct(conn, only_new=True)


@pytest.fixture(scope="module")
def served(synced):
    """The service's own dates, read by an independent walk (the world has not moved since the sync)."""
    from tests.backfill.served_past import ServedPast

    _, sim = synced
    return ServedPast.walk(sim.base_url, sim.api_key)
