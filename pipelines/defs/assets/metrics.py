"""The metrics snapshot the exporter serves: one part per workspace."""

from functools import partial
from pathlib import Path
from typing import Any

import dagster as dg

from pipelines.backfill.reconstruct import reconstruct
from pipelines.defs.assets.step import OpenStep, partition_workspace, sync_step
from pipelines.defs.freshness import REFRESHED
from pipelines.defs.partitions import WORKSPACES
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.snapshot.catalogue import CRITICAL_INFO_LIMIT, CRITICAL_NEW_LIMIT
from pipelines.sync.snapshot import refresh_snapshot


class SnapshotConfig(dg.Config):
    path: str = ""  # default: SCANWATCH_SNAPSHOT, else a folder beside the database
    sla_days: dict[str, int] = {}  # per severity; unnamed ones come from SCANWATCH_SLA_DAYS or 7/30/90/180
    critical_info_limit: int = CRITICAL_INFO_LIMIT  # per workspace, bound on the info series of open critical issues
    critical_new_limit: int = CRITICAL_NEW_LIMIT  # per workspace, bound on the issues the new-critical alert names


@dg.asset(group_name="exporter", kinds={"duckdb", "prometheus"}, partitions_def=WORKSPACES,
          deps=["account", "projects", "targets", "scans", "issues"], pool="duckdb", freshness_policy=REFRESHED)
def metrics_snapshot(
    context: dg.AssetExecutionContext, config: SnapshotConfig, history: HistoryResource,
    scanning_service: ScanningServiceResource,
) -> dg.MaterializeResult[Any]:
    """The workspace's part of the metrics snapshot: its aggregates, computed by the history's database from
    its rows only and replaced atomically: a JSON file in the snapshot's folder beside a DuckDB history, or
    its row of a PostgreSQL history's `snapshot_parts` table (so run pods and the exporter share no disk).
    The exporter serves every workspace's part together, never the history's tables, so a scrape never waits
    for a sync and never takes DuckDB's lock; a workspace's run costs what that workspace holds, whatever the
    others hold. Its run is recorded once the part is in place (a write that fails is recorded as a failure):
    the part carries this sync's other assets and this asset's previous run.

    At the end of a workspace's first sync it also reconstructs the days before it from the scans and issues
    just read (`scanwatch backfill`), after the part is written: the snapshot reads none of what the
    reconstruction writes, so a reconstruction that fails never holds back the workspace's fresh metrics."""
    step = partial(sync_step, context, "metrics_snapshot", history, scanning_service,
                   partition_workspace(context, scanning_service), reads_service=False)
    return dg.MaterializeResult(metadata=refresh_metrics(step, config, history)["metrics_snapshot"])


def refresh_metrics(open_step: OpenStep, config: SnapshotConfig, history: HistoryResource) -> dict[str, dict[str, Any]]:
    """The asset's work, whoever runs it: its metadata by asset key."""
    with open_step() as step, step.db(keep=True) as conn:
        part = refresh_snapshot(conn, workspace_id=step.workspace_id, label=step.label,
                                path=Path(config.path) if config.path else None, now=step.now,
                                sla_days=config.sla_days, critical_info_limit=config.critical_info_limit,
                                critical_new_limit=config.critical_new_limit, workspace=step.workspace,
                                found=history.settings())
        for warning in part.warnings:
            step.log.warning(warning)
        rebuilt = reconstruct(conn, now=step.now, only_new=True, workspace_id=step.workspace_id) \
            if step.workspace_id is not None else []
        for result in rebuilt:
            step.log.info("reconstructed the past of %s", result.describe())
    where = dg.MetadataValue.text(part.location) if conn.engine.capabilities.holds_snapshot else \
        dg.MetadataValue.path(part.location)
    return {"metrics_snapshot": {"path": where, "bytes": part.bytes, "parts_written": part.parts,
                                 "workspaces_reconstructed": len(rebuilt), **step.metadata}}
