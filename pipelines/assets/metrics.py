"""The metrics snapshot the exporter serves."""

from pathlib import Path

import dagster as dg

from pipelines.assets.step import sync_step
from pipelines.backfill.reconstruct import reconstruct
from pipelines.resources import HistoryResource
from pipelines.snapshot import CRITICAL_NEW_LIMIT, refresh_snapshot


class SnapshotConfig(dg.Config):
    path: str = ""  # default: SCANWATCH_SNAPSHOT, else a file beside the database
    sla_days: dict[str, int] = {}  # per severity; unnamed ones come from SCANWATCH_SLA_DAYS or 7/30/90/180
    critical_info_limit: int = 50  # bound on the per-issue info series for open critical issues
    critical_new_limit: int = CRITICAL_NEW_LIMIT  # per workspace, bound on the issues the new-critical alert names


@dg.asset(group_name="exporter", kinds={"duckdb", "prometheus"},
          deps=["account", "projects", "targets", "scans", "issues"], pool="duckdb")
def metrics_snapshot(
    context: dg.AssetExecutionContext, config: SnapshotConfig, history: HistoryResource
) -> dg.MaterializeResult:
    """Aggregates of the whole history, computed in DuckDB and written atomically as one JSON file. The
    exporter serves this file, never the database, so a scrape never waits for a sync and never takes
    DuckDB's lock. Its run is recorded once the file is in place (a write that fails is recorded as a
    failure): the file carries this sync's other assets and this asset's previous run.

    At the end of a workspace's first sync it also reconstructs the days before it from the scans and issues
    just read (`scanwatch backfill`), so the history starts with the past the service already held."""
    with sync_step(context, "metrics_snapshot", history, None) as step, step.db() as conn:
        rebuilt = reconstruct(conn, now=step.now, only_new=True)
        for result in rebuilt:
            context.log.info("reconstructed the past of %s", result.describe())
        path = refresh_snapshot(conn, path=Path(config.path) if config.path else None, now=step.now,
                                sla_days=config.sla_days, critical_info_limit=config.critical_info_limit,
                                critical_new_limit=config.critical_new_limit)
    return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(path)),
                                          "bytes": path.stat().st_size,
                                          "workspaces_reconstructed": len(rebuilt), **step.metadata})
