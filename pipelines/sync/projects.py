"""The projects step: projects and their targets, from one walk of GET /projects."""

from __future__ import annotations

from pipelines.core.sqlfiles import read_sql
from pipelines.storage import MergeResult, merge_projects
from pipelines.sync.step import Step, row_counts


def sync_projects(step: Step) -> tuple[MergeResult, dict[str, int]]:
    """The project list embeds targets, so one walk (a page per 100 projects) feeds both tables; the merge's
    result and the rows each table then holds for the workspace."""
    with step.db() as conn:
        if step.workspace_id is None:
            raise RuntimeError("no account in the history yet: materialize the account asset first")
        expected = conn.execute(read_sql("sync/projects_expected.sql"),
                                {"workspace_id": step.workspace_id}).fetchall()[0][0]
    body = step.service.list_projects(expected=expected)
    with step.db(keep=True) as conn:
        result = step.add(merge_projects(conn, step.workspace_id, body, now=step.now))
        counts = row_counts(conn, step.workspace_id)
    return result, counts
