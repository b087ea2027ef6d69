"""Projects and their targets, from one walk of GET /projects."""

from collections.abc import Iterator
from functools import partial
from typing import Any

import dagster as dg

from pipelines.defs.assets.step import OpenStep, partition_workspace, row_count, sync_step
from pipelines.defs.freshness import REFRESHED
from pipelines.defs.partitions import WORKSPACES
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.sync.projects import sync_projects


@dg.multi_asset(
    specs=[
        dg.AssetSpec("projects", group_name="service", kinds={"duckdb"}, deps=["account"],
                     freshness_policy=REFRESHED,
                     description="Current projects (score, grade, open issues, paused) and a score snapshot per "
                                 "project per sync; projects the service stops listing get `removed_at`."),
        dg.AssetSpec("targets", group_name="service", kinds={"duckdb"}, deps=["account"],
                     freshness_policy=REFRESHED,
                     description="Current targets (sites and repositories) with score, verification and the "
                                 "count of hidden issues, and a score snapshot per target per sync."),
    ],
    partitions_def=WORKSPACES,
)
def projects_and_targets(
    context: dg.AssetExecutionContext, scanning_service: ScanningServiceResource, history: HistoryResource
) -> Iterator[dg.MaterializeResult[Any]]:
    """The project list embeds targets, so one walk (a page per 100 projects) feeds both tables."""
    step = partial(sync_step, context, "projects", history, scanning_service,
                   partition_workspace(context, scanning_service))
    for key, metadata in refresh_projects(step).items():
        yield dg.MaterializeResult(asset_key=key, metadata=metadata)


def refresh_projects(open_step: OpenStep) -> dict[str, dict[str, Any]]:
    """The asset's work, whoever runs it: its metadata by asset key."""
    with open_step() as step:
        result, held = sync_projects(step)
    targets_rows = result.rows["targets"] + result.rows["targets"]  # current rows and their score snapshots
    return {
        "projects": row_count({**step.metadata, "rows_written": step.rows_written - targets_rows,
                               "projects": result.rows["projects"]}, held["projects"]),
        "targets": row_count({"rows_written": targets_rows, "targets": result.rows["targets"]}, held["targets"]),
    }
