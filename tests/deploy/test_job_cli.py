"""`dagster job execute` from the command line, as an operator types it: without the workspace partition it
stops with one line naming the tag to pass; with the tag the job runs (the README's command)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pipelines.snapshot.format import read_snapshot
from tests.deploy.conftest import BIN, ROOT, child_env

COMMAND = [str(BIN / "dagster"), "job", "execute", "-m", "pipelines.definitions", "-j", "refresh_job"]
TAG = '{"dagster/partition": "default"}'


def _execute(sim, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = child_env(sim, DAGSTER_HOME=str(home), SCANWATCH_DB=str(tmp_path / "history.duckdb"))
    return subprocess.run([*COMMAND, *extra], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_a_run_without_a_partition_names_the_tag_in_one_line(sim, tmp_path):
    done = _execute(sim, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Cannot access partition_key" not in output  # Dagster's own error from a later step, before
    lines = [line for line in output.splitlines() if "runs one workspace" in line]
    assert lines, output[-3000:]
    expected = f"refresh_job runs one workspace: pass --tags '{TAG}' to dagster job execute (workspaces: default)"
    assert all(expected in line for line in lines)
    assert not (tmp_path / "scanwatch-metrics.json").exists()


def test_the_readme_command_with_the_tag_runs_the_job(sim, tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert f"dagster job execute -m pipelines.definitions -j refresh_job --tags '{TAG}'" in readme
    done = _execute(sim, tmp_path, "--tags", TAG)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    snapshot = read_snapshot(tmp_path / "scanwatch-metrics.json")  # the folder of one part per workspace
    assert snapshot["generated_at_seconds"] > 0
