"""Projects and their targets, from one walk of GET /projects."""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from pipelines.core.sqlfiles import read_sql
from pipelines.defs.assets.step import partition_workspace, sync_step
from pipelines.defs.partitions import WORKSPACES
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.storage import merge_projects


@dg.multi_asset(
    specs=[
        dg.AssetSpec("projects", group_name="service", kinds={"duckdb"}, deps=["account"],
                     description="Current projects (score, grade, open issues, paused) and a score snapshot per "
                                 "project per sync; projects the service stops listing get `removed_at`."),
        dg.AssetSpec("targets", group_name="service", kinds={"duckdb"}, deps=["account"],
                     description="Current targets (sites and repositories) with score, verification and the "
                                 "count of hidden issues, and a score snapshot per target per sync."),
    ],
    partitions_def=WORKSPACES,
)
def projects_and_targets(
    context: dg.AssetExecutionContext, scanning_service: ScanningServiceResource, history: HistoryResource
) -> Iterator[dg.MaterializeResult[Any]]:
    """The project list embeds targets, so one walk (a page per 100 projects) feeds both tables."""
    with sync_step(context, "projects", history, scanning_service, partition_workspace(context)) as step:
        with step.db() as conn:
            if step.workspace_id is None:
                raise RuntimeError("no account in the history yet: materialize the account asset first")
            expected = conn.execute(read_sql("sync/projects_expected.sql"),
                                    {"workspace_id": step.workspace_id}).fetchall()[0][0]
        body = step.api.list_projects(expected=expected)
        with step.db(keep=True) as conn:
            result = step.add(merge_projects(conn, step.workspace_id, body, now=step.now))
    targets_rows = result.rows["targets"] + result.rows["targets"]  # current rows and their score snapshots
    yield dg.MaterializeResult(asset_key="projects", metadata={
        **step.metadata, "rows_written": step.rows_written - targets_rows, "projects": result.rows["projects"]})
    yield dg.MaterializeResult(asset_key="targets", metadata={"rows_written": targets_rows,
                                                              "targets": result.rows["targets"]})
