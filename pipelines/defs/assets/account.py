"""The account: plan, API access, quotas and credits; and which workspace a followed name stands for."""

from functools import partial
from typing import Any

import dagster as dg

from pipelines.defs.assets.step import OpenStep, partition_workspace, sync_step
from pipelines.defs.freshness import REFRESHED
from pipelines.defs.partitions import WORKSPACES
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.sync.account import sync_account


@dg.asset(group_name="service", kinds={"duckdb"}, partitions_def=WORKSPACES, freshness_policy=REFRESHED)
def account(
    context: dg.AssetExecutionContext, scanning_service: ScanningServiceResource, history: HistoryResource
) -> dg.MaterializeResult[Any]:
    """Current plan, API access and trial end, and one `quota_snapshots` row per quota, so quota burn
    against the period can be charted. One request; free of charge on the service. The first sync of a
    followed workspace binds its name to the service's workspace id; a key that later answers for another
    workspace is refused rather than mixing two workspaces under one name."""
    step = partial(sync_step, context, "account", history, scanning_service,
                   partition_workspace(context, scanning_service))
    return dg.MaterializeResult(metadata=refresh_account(step)["account"])


def refresh_account(open_step: OpenStep) -> dict[str, dict[str, Any]]:
    """The asset's work, whoever runs it: its metadata by asset key."""
    with open_step() as step:
        sync_account(step)
    return {"account": step.metadata}
