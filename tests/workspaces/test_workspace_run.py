"""`scanwatch sync` without `DAGSTER_HOME` runs each workspace's steps itself (`pipelines/commands/
workspace_run.py`); with it, each workspace is a Dagster run of `sync_job`. Both must do the same work and
tell the same story: the same steps in the same order, recorded the same way, the same tables, the same
summary and the same one-line failure, for healthy workspaces and for one whose key the service refuses.

What fails this: a step left out or run out of Dagster's order, a step run after the step it needs failed,
a failure reported under another step or with another line, the checks or the snapshot skipped, or the
assets' config defaults read differently by the two."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.e2e.stack import ROOT
from tests.ingest.conftest import query
from tests.reliability import forked
from tests.workspaces.pair import environment

pytestmark = pytest.mark.timeout(600)

TABLES = ("accounts", "quota_snapshots", "projects", "targets", "score_snapshots", "scans", "issues",
          "issue_events", "ingest_warnings")


@pytest.fixture(scope="module")
def sim() -> Iterator:
    with serve_simulator(SimConfig(seed=11, scale="small", clock="driven", control=True, rate_limit=100000,
                                   pro_workspaces=2)) as s:
        yield s


def _deployment(sim, folder: Path, db: str, dagster: bool) -> dict[str, str]:
    """`pair.FILE`'s three workspaces (`initech`'s key refused) on the history `db`, in a folder of their own."""
    folder.mkdir()
    env = environment(sim, folder, db)
    env["SCANWATCH_SNAPSHOT"] = str(folder / "snapshot")
    if dagster:
        (folder / "dagster_home").mkdir()
        env["DAGSTER_HOME"] = str(folder / "dagster_home")
    return env


def _told(done: subprocess.CompletedProcess) -> tuple[int, list[str], list[str]]:
    """Exit code, the summary's lines with their timings taken out, and the failure and warning lines (the
    progress lines of workspaces synced at once interleave)."""
    out = [re.sub(r"\d+\.\d+ s", "_ s", line) for line in done.stdout.splitlines()
           if line.startswith(("scanwatch sync:", "  acme/", "  globex/", "  initech/", "  asset checks"))]
    said = [re.sub(r"Request-Id: req_\w+", "Request-Id: _", line) for line in done.stderr.splitlines()
            if line.startswith(("scanwatch sync:", "  warning:"))]  # the service's id of each answer differs
    return done.returncode, out, said


def _recorded(db: str) -> dict[str, list[tuple[str, str]]]:
    """Each workspace's runs as (asset, status) in the order the steps started, the runs in theirs."""
    rows = query(db, "SELECT workspace_label, run_id, asset, status FROM sync_runs "
                     "ORDER BY workspace_label, min(started_at) OVER (PARTITION BY run_id), started_at")
    steps: dict[str, list[tuple[str, str]]] = {}
    for label, _, asset, status in rows:
        steps.setdefault(label, []).append((asset, status))
    return steps


def _held(db: str) -> dict[str, tuple[int, ...]]:
    """The rows each table holds for each workspace, by the name it is followed under."""
    ids = dict(query(db, "SELECT DISTINCT workspace_label, workspace_id FROM sync_runs WHERE workspace_id IS NOT NULL"))
    return {label: tuple(query(db, f"SELECT count(*) FROM {table} WHERE workspace_id = '{workspace_id}'")[0][0]
                         for table in TABLES) for label, workspace_id in ids.items()}


def _parts(env: dict[str, str]) -> list[str]:
    """The snapshot's parts, in the folder `SCANWATCH_SNAPSHOT` names (on either engine)."""
    return sorted(p.stem for p in Path(env["SCANWATCH_SNAPSHOT"]).iterdir())


def test_a_sync_without_dagsters_instance_does_and_tells_what_dagsters_runs_do(sim, tmp_path, new_history):
    seen = {}
    for mode in ("dagster", "own"):
        env = _deployment(sim, tmp_path / mode, new_history(), dagster=mode == "dagster")
        first = forked.run(["sync"], env, timeout=300, cwd=ROOT)
        again = forked.run(["sync"], env, timeout=300, cwd=ROOT)  # unchanged: two requests a workspace
        db = env["SCANWATCH_DB"]
        seen[mode] = {"first": _told(first), "again": _told(again), "recorded": _recorded(db), "held": _held(db),
                      "parts": _parts(env)}
    dagster, own = seen["dagster"], seen["own"]
    code, summary, failures = own["first"]
    assert len(own["parts"]) == 3, own["parts"]  # the refused workspace's part shows its failure
    assert code == 1 and failures[-1].startswith("scanwatch sync: workspace initech failed in account: "), failures
    assert any(line.startswith("  acme/issues ") for line in summary), summary
    assert own == dagster
    # Each healthy workspace ran every recorded step twice, in Dagster's order; the refused one its account only.
    steps = [("account", "success"), ("projects", "success"), ("issues", "success"), ("scans", "success"),
             ("metrics_snapshot", "success")]
    assert own["recorded"]["acme"] == steps * 2
    assert own["recorded"]["globex"] == steps * 2
    assert own["recorded"]["initech"] == [("account", "failure")] * 2


def test_a_failed_step_skips_only_the_steps_that_need_it(sim, tmp_path, monkeypatch, engine_db):
    """Dagster's rule, kept without it: after `projects` fails, its run reads no issues or scans of projects it
    could not list, checks nothing and writes no part; the failure is the projects step's, in the service's
    words, and the part shows it (`refresh_after_failure`)."""
    from pipelines.commands import materialize, workspace_run

    env = _deployment(sim, tmp_path / "own", engine_db, dagster=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    started = []

    def refused(*args: object) -> None:
        started.append("projects")
        raise RuntimeError("projects refused")

    monkeypatch.setattr(workspace_run, "refresh_projects", refused)
    monkeypatch.setattr(workspace_run, "count_breaks", lambda *args: started.append("checks") or {})
    outcome = materialize.materialize_all(workspace="acme", console_level="CRITICAL")
    assert not outcome.success and outcome.failed_step == "projects_and_targets" and started == ["projects"]
    assert outcome.error is not None and outcome.error.message.startswith("RuntimeError: projects refused")
    assert set(outcome.metadata) == {"account"}
    assert _recorded(engine_db)["acme"] == [("account", "success")]
    assert len(_parts(env)) == 1  # written by refresh_after_failure: no metrics step ran
