"""Scan history, read incrementally."""

from datetime import timedelta
from functools import partial
from typing import Any

import dagster as dg

from pipelines.defs.assets.step import OpenStep, partition_workspace, row_count, sync_step
from pipelines.defs.freshness import REFRESHED_HOURLY
from pipelines.defs.partitions import WORKSPACES
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.sync.scans import sync_scans


class ScansConfig(dg.Config):
    all_projects: bool = False  # read every project's scan list, not only the ones that moved
    # Only these projects (the scan-finished sensor's runs name theirs): a run that reads other moved projects'
    # scans but not their issues would leave those issues behind their scans, and the sensor would ask for
    # another run for them, minute after minute on a busy workspace. The hourly scans run reads the rest.
    project_ids: list[str] = []
    # A project that did not move still has its newest scan page read when its list is older than this share
    # of the scans schedule's interval (a little under one, so every tick reads it despite start-time jitter).
    peek_share_of_interval: float = 0.9


@dg.asset(group_name="service", kinds={"duckdb"}, deps=["projects", "targets"], partitions_def=WORKSPACES,
          freshness_policy=REFRESHED_HOURLY)
def scans(
    context: dg.AssetExecutionContext, config: ScansConfig,
    scanning_service: ScanningServiceResource, history: HistoryResource,
) -> dg.MaterializeResult[Any]:
    """One row per scan ever seen. Lists are newest first, so each moved project is read only down to the
    first scan the history already holds as finished (and past the scans sharing its created_at); scans still
    queued in the history are re-read one by one. A failed scan need not move anything GET /projects shows, so
    a project that has not moved still has its newest scan page read once per scans-schedule interval: at most
    one request per project per interval, none between."""
    step = partial(sync_step, context, "scans", history, scanning_service,
                   partition_workspace(context, scanning_service))
    return dg.MaterializeResult(metadata=refresh_scans(step, config, scanning_service)["scans"])


def refresh_scans(open_step: OpenStep, config: ScansConfig,
                  scanning_service: ScanningServiceResource) -> dict[str, dict[str, Any]]:
    """The asset's work, whoever runs it: its metadata by asset key."""
    with open_step() as step:
        interval = scanning_service.settings().scans_interval_seconds
        held = sync_scans(step, all_projects=config.all_projects, project_ids=config.project_ids,
                          peek_before=step.now - timedelta(seconds=interval * config.peek_share_of_interval))
    return {"scans": row_count(step.metadata, held)}
