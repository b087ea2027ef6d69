"""Issues and their history of changes."""

from datetime import timedelta
from functools import partial
from typing import Any

import dagster as dg

from pipelines.defs.assets.step import OpenStep, partition_workspace, row_count, sync_step
from pipelines.defs.freshness import REFRESHED
from pipelines.defs.partitions import WORKSPACES
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.sync.issues import sync_issues


class IssuesConfig(dg.Config):
    project_ids: list[str] = []  # read just these projects (the scan-finished sensor sets it)
    full_reconcile: bool = False  # read every project regardless of what moved
    full_reconcile_hours: float = 6.0  # how often each project is read even when nothing seems to have moved


@dg.asset(group_name="service", kinds={"duckdb"}, deps=["projects", "targets"], partitions_def=WORKSPACES,
          freshness_policy=REFRESHED)
def issues(
    context: dg.AssetExecutionContext, config: IssuesConfig,
    scanning_service: ScanningServiceResource, history: HistoryResource,
) -> dg.MaterializeResult[Any]:
    """Current state of every issue ever seen, plus `issue_events`: opened, status_changed (fixed, marked,
    unmarked), severity_changed and reopened, computed in SQL by diffing the staged lists against the
    history. Only projects whose observable state moved are read; a slower full reconcile catches marks and
    rechecks that leave a project's counts unchanged. Issues of unproved sites stay hidden by the service."""
    step = partial(sync_step, context, "issues", history, scanning_service,
                   partition_workspace(context, scanning_service))
    return dg.MaterializeResult(metadata=refresh_issues(step, config)["issues"])


def refresh_issues(open_step: OpenStep, config: IssuesConfig) -> dict[str, dict[str, Any]]:
    """The asset's work, whoever runs it: its metadata by asset key."""
    with open_step() as step:
        held = sync_issues(step, project_ids=config.project_ids, full_reconcile=config.full_reconcile,
                           reconcile_before=step.now - timedelta(hours=config.full_reconcile_hours))
    return {"issues": row_count(step.metadata, held)}
