"""Issues and their history of changes."""

import time
from datetime import timedelta
from typing import Any

import dagster as dg

from pipelines.api import NotFoundError, PagingError
from pipelines.core import milestones
from pipelines.core.sqlfiles import read_sql
from pipelines.defs.assets.step import Progress, partition_workspace, sync_step
from pipelines.defs.partitions import WORKSPACES
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.storage import merge_issue_stages, stage_format
from pipelines.storage.entities import ISSUE
from pipelines.storage.stage import StageFile


class IssuesConfig(dg.Config):
    project_ids: list[str] = []  # read just these projects (the scan-finished sensor sets it)
    full_reconcile: bool = False  # read every project regardless of what moved
    full_reconcile_hours: float = 6.0  # how often each project is read even when nothing seems to have moved


@dg.asset(group_name="service", kinds={"duckdb"}, deps=["projects", "targets"], partitions_def=WORKSPACES)
def issues(
    context: dg.AssetExecutionContext, config: IssuesConfig,
    scanning_service: ScanningServiceResource, history: HistoryResource,
) -> dg.MaterializeResult[Any]:
    """Current state of every issue ever seen, plus `issue_events`: opened, status_changed (fixed, marked,
    unmarked), severity_changed and reopened, computed in SQL by diffing the staged lists against the
    history. Only projects whose observable state moved are read; a slower full reconcile catches marks and
    rechecks that leave a project's counts unchanged. Issues of unproved sites stay hidden by the service."""
    with sync_step(context, "issues", history, scanning_service, partition_workspace(context)) as step:
        client = step.api
        with step.db() as conn:
            todo = conn.execute(read_sql("sync/issue_projects.sql"), {
                "workspace_id": step.workspace_id, "full": config.full_reconcile,
                "reconcile_before": step.now - timedelta(hours=config.full_reconcile_hours),
                "only": config.project_ids,
            }).fetchall()
            pages, first_read, expected = 0, False, {}
            if todo:  # both count the history's issues: a re-sync that reads no list needs neither
                pages, first_read = conn.execute(read_sql("sync/issue_pages_estimate.sql"), {
                    "project_ids": [pid for pid, _, _ in todo], "page_size": client.page_size}).fetchall()[0]
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
                context.log.warning("project %s vanished before its issues were read; skipped", project_id)
                return None
            except PagingError as exc:
                # Not marked as read: the next sync tries this project again; the others land now.
                context.log.warning("issues of project %s skipped: %s", project_id, exc)
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
    return dg.MaterializeResult(metadata=step.metadata)
