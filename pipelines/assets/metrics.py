"""The metrics snapshot the exporter serves."""

from pathlib import Path

import dagster as dg

from pipelines import settings
from pipelines._killpoints import killpoint
from pipelines.assets._step import sync_step
from pipelines.resources import HistoryResource
from pipelines.snapshot import build_snapshot, write_snapshot


class SnapshotConfig(dg.Config):
    path: str = ""  # default: SCANWATCH_SNAPSHOT, else a file beside the database
    sla_days_critical: int = 7
    sla_days_high: int = 30
    sla_days_medium: int = 90
    sla_days_low: int = 180
    critical_info_limit: int = 50  # bound on the per-issue info series for open critical issues


@dg.asset(group_name="exporter", kinds={"duckdb", "prometheus"},
          deps=["account", "projects", "targets", "scans", "issues"], pool="duckdb")
def metrics_snapshot(
    context: dg.AssetExecutionContext, config: SnapshotConfig, history: HistoryResource
) -> dg.MaterializeResult:
    """Aggregates of the whole history, computed in DuckDB and written atomically as one JSON file. The
    exporter serves this file, never the database, so a scrape never waits for a sync and never takes
    DuckDB's lock. Its own success is recorded first, so the snapshot carries this sync's health."""
    path = Path(config.path) if config.path else settings.paths().snapshot
    with sync_step(context, "metrics_snapshot", history, None) as step:
        pass
    with history.get_connection() as conn:
        snapshot = build_snapshot(
            conn, now=step.now, critical_info_limit=config.critical_info_limit,
            sla_days={"critical": config.sla_days_critical, "high": config.sla_days_high,
                      "medium": config.sla_days_medium, "low": config.sla_days_low},
        )
    killpoint("snapshot.built")
    write_snapshot(snapshot, path)
    return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(path)),
                                          "bytes": path.stat().st_size, **step.metadata})
