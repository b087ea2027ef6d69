"""The account: plan, API access, quotas and credits."""

import dagster as dg

from pipelines.assets.step import sync_step
from pipelines.resources import HistoryResource, ScanningServiceResource
from pipelines.storage import merge_account


@dg.asset(group_name="service", kinds={"duckdb"}, pool="duckdb")
def account(
    context: dg.AssetExecutionContext, scanning_service: ScanningServiceResource, history: HistoryResource
) -> dg.MaterializeResult:
    """Current plan, API access and trial end, and one `quota_snapshots` row per quota, so quota burn
    against the period can be charted. One request; free of charge on the service."""
    with sync_step(context, "account", history, scanning_service) as step:
        body = step.client.get_account()
        step.workspace_id = (body.get("workspace") or {}).get("id")
        step.add(merge_account(step.conn, body, now=step.now, service_version=step.client.stats.service_version))
        step.metadata.update({"workspace": (body.get("workspace") or {}).get("name"), "plan": body.get("plan")})
    return dg.MaterializeResult(metadata=step.metadata)
