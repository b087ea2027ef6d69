"""The metrics_snapshot asset records its run once the file is written: a write that fails is a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ingest.conftest import query, run_sync


def test_a_snapshot_that_cannot_be_written_is_recorded_as_a_failure(
        env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the snapshot's folder should be\n")
    monkeypatch.setenv("SCANWATCH_SNAPSHOT", str(blocker / "scanwatch-metrics.json"))
    outcome = run_sync()
    assert not outcome.success and outcome.failed_step == "metrics_snapshot"
    runs = query(env, "SELECT status FROM sync_runs WHERE asset = 'metrics_snapshot'")
    assert runs == [("failure",)]


def test_a_written_snapshot_is_recorded_as_a_success(env: Path) -> None:
    assert run_sync().success
    assert query(env, "SELECT status FROM sync_runs WHERE asset = 'metrics_snapshot'") == [("success",)]
    folder = env.parent / "scanwatch-metrics.json"  # one part per workspace in the folder the setting names
    assert folder.is_dir() and [p.suffix for p in folder.iterdir()] == [".json"]
