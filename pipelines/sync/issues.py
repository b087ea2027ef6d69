"""The issues step: issues and their history of changes, read for the projects that moved."""

from __future__ import annotations

import time
from datetime import datetime

from pipelines.api import NotFoundError, PagingError
from pipelines.core import milestones
from pipelines.core.sqlfiles import read_sql
from pipelines.storage import merge_issue_stages, stage_format
from pipelines.storage.entities import ISSUE
from pipelines.storage.stage import StageFile
from pipelines.sync.step import Progress, Step, row_counts


def sync_issues(step: Step, *, project_ids: list[str], full_reconcile: bool, reconcile_before: datetime) -> int:
    """Only projects whose observable state moved are read, and every project last read in full before
    `reconcile_before` (`full_reconcile`: all of them; `project_ids`: only these); the staged lists are then
    diffed against the history in SQL. The rows the workspace's issues table then holds."""
    client = step.service
    with step.db() as conn:
        todo = conn.execute(read_sql("sync/issue_projects.sql"), {
            "workspace_id": step.workspace_id, "full": full_reconcile,
            "reconcile_before": reconcile_before, "only": project_ids,
        }).fetchall()
        pages, first_read, expected = 0, False, {}
        if todo:  # both count the history's issues: a re-sync that reads no list needs neither
            pages, first_read = conn.execute(read_sql("sync/issue_pages_estimate.sql"), {
                "workspace_id": step.workspace_id, "project_ids": [pid for pid, _, _ in todo],
                "page_size": client.page_size}).fetchall()[0]
            expected = {pid: n for pid, n, _ in conn.execute(read_sql("sync/list_expectations.sql"),
                                                             {"workspace_id": step.workspace_id}).fetchall()}
        line_format = stage_format(conn, ISSUE)

    progress = Progress(step.named("issues"), len(todo), client)
    progress.announce(pages, floor=first_read)

    opened: list[StageFile] = []  # every stage file, so that a failure leaves none behind

    def read(project_id: str) -> StageFile | None:
        stage = StageFile(ISSUE.name, line_format)
        opened.append(stage)
        milestones.reached("issues.paging")
        try:
            for issue in client.iter_issues(project_id, on_restart=stage.restart,
                                            expected=expected.get(project_id)):
                stage.write(issue)
        except NotFoundError:
            step.log.warning("project %s vanished before its issues were read; skipped", project_id)
            return None
        except PagingError as exc:
            # Not marked as read: the next sync tries this project again; the others land now.
            step.log.warning("issues of project %s skipped: %s", project_id, exc)
            return None
        finally:
            stage.close()
        progress.step(stage.count)
        return stage

    try:
        stages = client.map(read, [pid for pid, _, _ in todo])
        done = [(pid, fp, full) for (pid, fp, full), got in zip(todo, stages, strict=True) if got is not None]
        read_stages = [got for got in stages if got is not None]
        merge_started = time.perf_counter()
        with step.db(keep=True) as conn:
            result = step.add(merge_issue_stages(conn, step.known_workspace_id, read_stages, now=step.now,
                                                 project_state=done))
            held = row_counts(conn, step.workspace_id)["issues"]
        merge_seconds = time.perf_counter() - merge_started
    finally:
        for stage in opened:
            stage.discard()
    step.metadata.update({
        "projects_read": len(done),
        "projects_full_reconcile": sum(1 for _, _, full in done if full),
        "issues_read": sum(got.count for got in read_stages),
        "merge_seconds": round(merge_seconds, 3),
        **{f"events_{k}": v for k, v in sorted(result.events.items())},
    })
    return held
