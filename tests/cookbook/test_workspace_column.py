"""Every cookbook query names the workspace of each row by its followed name, `--workspace` narrows it, and
`sync_health` gives one row per workspace and asset: with the demo's two workspaces (both hold a project of
the same name) and a third whose key the service refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.core import sqlfiles
from pipelines.storage.read_only import execute_read_only
from tests.workspaces.pair import NAMES, Pair, synced_pair

pytestmark = pytest.mark.timeout(900)
FOLLOWED = {*NAMES, "initech"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with synced_pair(tmp_path_factory.mktemp("pair")) as synced:
        assert synced.sync.returncode == 1 and "workspace initech failed" in synced.sync.stderr, synced.sync.stderr
        yield synced


def _rows(db: Path, name: str, workspace: str | None = None) -> list[dict]:
    columns, rows = execute_read_only(db, sqlfiles.cookbook()[name].sql, workspace=workspace)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def test_every_query_names_the_followed_workspace_of_each_row(pair: Pair) -> None:
    both = set()
    for name in sqlfiles.cookbook():
        rows = _rows(pair.db, name)
        assert all("workspace" in row for row in rows), name
        named = {row["workspace"] for row in rows}
        assert named <= FOLLOWED, (name, named - FOLLOWED)  # never the service's own name ("Acme Corp")
        if named >= set(NAMES):
            both.add(name)
    # Each world holds issues, scores, fixes and quotas: those answers carry both workspaces.
    assert {"open_issues_by_day", "open_issues_by_project", "project_score_history", "target_score_history",
            "noisiest_controls", "quota_burn", "time_to_fix_by_severity", "time_to_fix_by_project",
            "sync_health"} <= both


def test_a_project_name_both_workspaces_hold_is_told_apart(pair: Pair) -> None:
    rows = _rows(pair.db, "project_score_history")
    shared = {row["project"] for row in rows if row["workspace"] == "acme"} & \
        {row["project"] for row in rows if row["workspace"] == "globex"}
    assert shared, "the two worlds are shaped alike: some project name is in both"
    name = sorted(shared)[0]
    assert {row["workspace"] for row in rows if row["project"] == name} == set(NAMES)
    assert len({row["project_id"] for row in rows if row["project"] == name}) == 2


def test_workspace_keeps_narrowing_every_query(pair: Pair) -> None:
    for name in sqlfiles.cookbook():
        rows = _rows(pair.db, name, workspace="globex")
        assert {row["workspace"] for row in rows} <= {"globex"}, name
    done = pair.cli("sql", "open_issues_by_project", "--workspace", "acme", "--format", "json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert listed and {row["workspace"] for row in listed} == {"acme"}


def test_sync_health_shows_the_failing_workspace_beside_the_healthy_ones(pair: Pair) -> None:
    rows = _rows(pair.db, "sync_health")
    keys = [(row["workspace"], row["asset"]) for row in rows]
    assert len(keys) == len(set(keys)), "one row per workspace and asset"
    last = {key: row["last_status"] for key, row in zip(keys, rows, strict=True)}
    assert last[("initech", "account")] == "failure"
    for name in NAMES:
        assert last[(name, "account")] == "success" and last[(name, "issues")] == "success", last
    assert rows[0]["workspace"] == "initech"  # failing runs first
