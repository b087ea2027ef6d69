"""Scheduled scans run as Dagster runs them, against a synced simulator: shared by the scheduled-scan suites."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.ingest.conftest import Oracle, run_sync


@contextmanager
def synced_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Path | str | None = None,
                 **config: Any) -> Iterator[tuple[Any, Path | str]]:
    """A simulator whose scans end at once, and a history a first sync has filled: (simulator, database).
    `db`: the history (a DuckDB file or a PostgreSQL URL, as `engine_db` gives); a DuckDB file by default."""
    settings = dict(seed=5, scale="small", clock="driven", control=True, rate_limit=100000, scan_seconds=0)
    with serve_simulator(SimConfig(**{**settings, **config})) as sim:
        db = tmp_path / "h.duckdb" if db is None else db
        monkeypatch.setenv("SCANWATCH_BASE_URL", sim.base_url)
        monkeypatch.setenv("SCANWATCH_API_KEY", sim.api_key)
        monkeypatch.setenv("SCANWATCH_DB", str(db))
        assert run_sync().success
        yield sim, db


def run_scheduled(sim, db: Path | str, targets: list[str], *, kind: str = "quick", reserve: int = 0,
                  tick: str = "20261124T0300") -> dict[str, Any]:
    """One run of the scheduled-scans job; its output metadata (started, skipped, reused, failed...)."""
    from pipelines.defs.resources import HistoryResource, ScanningServiceResource
    from pipelines.defs.scheduled_scans import scheduled_scans_job

    result = scheduled_scans_job.execute_in_process(
        run_config={"ops": {"start_and_wait_for_scans": {"config": {
            "target_ids": targets, "tick": tick, "kind": kind, "quota_reserve": reserve, "poll_seconds": 0.05}}}},
        resources={"scanning_service": ScanningServiceResource(base_url=sim.base_url, api_key=sim.api_key),
                   "history": HistoryResource(database=str(db))},
        raise_on_error=False,
    )
    assert result.success, "one target's refusal must not fail the run"
    output = next(e for e in result.all_events if e.event_type_value == "STEP_OUTPUT")
    return {k: v.value for k, v in output.event_specific_data.metadata.items()}


def read_account(sim) -> dict[str, Any]:
    return Oracle(sim.base_url, sim.api_key).http.get("/account").json()
