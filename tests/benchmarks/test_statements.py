"""The statement benchmark counts what it says it counts. Timings are never asserted; what is: a statement is
told apart by its file's first comment line, a step by its own frame rather than the step machinery's, and a
counted sync of unchanged workspaces runs every step in the writer's turn at two requests a workspace."""

from __future__ import annotations

import traceback

import pytest

from benchmarks import statements


def _frame(path: str, name: str) -> traceback.FrameSummary:
    return traceback.FrameSummary(path, 1, name)


def test_a_statement_is_named_by_its_file_s_first_comment_or_its_first_words():
    assert statements._statement("-- Projects to read\nSELECT 1") == "-- Projects to read"
    assert statements._statement("SELECT  count(*)\nFROM t") == "SELECT count(*) FROM t"


def test_a_statement_counts_for_the_innermost_step_not_the_step_machinery():
    stack = [_frame("/r/pipelines/commands/workspace_run.py", "run"),
             _frame("/r/pipelines/sync/projects.py", "sync_projects"),
             _frame("/r/pipelines/sync/step.py", "db"),
             _frame("/r/pipelines/storage/merge.py", "_load_stage")]
    assert statements._step(stack) == "projects.py:sync_projects"
    assert statements._step([_frame("/r/pipelines/storage/db.py", "connect")]) == "(other)"


@pytest.mark.slow
def test_a_counted_refresh_reads_each_workspace_at_two_requests_and_counts_its_steps(tmp_path):
    found = statements.measure(6, 3, tmp_path)
    assert found["requests_per_workspace"] == 2.0
    held = {step for where, step in found["cpu"] if where == "held"}
    assert {"projects.py:sync_projects", "account.py:sync_account", "scans.py:sync_scans"} <= held, held
    assert found["statements_per_workspace"] == sum(found["calls"].values()) / 3 > 0
    assert "costliest statements in the writer's turn" in statements.report(found, 6, 3, 5)
