"""Refresh a project soon after one of its scans finishes, instead of waiting for the next schedule tick."""

import hashlib

import dagster as dg
import duckdb

from pipelines.api import ApiConnectionError, ApiError, MalformedResponseError, NotFoundError, ServerError
from pipelines.jobs import project_refresh_job
from pipelines.resources import HistoryResource, ScanningServiceResource
from pipelines.sqlfiles import read_sql
from pipelines.vocabulary import UNFINISHED_SCAN_STATUSES

MAX_POLLS_PER_TICK = 20  # bounded: the sensor must not eat the rate limit the schedules need


@dg.sensor(job=project_refresh_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def scan_finished_sensor(
    context: dg.SensorEvaluationContext, scanning_service: ScanningServiceResource, history: HistoryResource
):
    """Polls the scans the history still holds as queued or running (one request each, at most 20 a minute)
    and asks for a refresh of the projects whose scans have finished. A scan that answers 404 asks for one
    too: the refresh settles it as gone, and nothing polls it again. One bad scan never stops the others, and
    a refused credential or plan is one skip line, never a failed tick."""
    try:
        # Read-only and brief: a run writing the history holds DuckDB's lock, and then this tick just waits.
        with duckdb.connect(history.database, read_only=True) as conn:
            pending = conn.execute(read_sql("sync/pending_scans.sql"),
                                   {"workspace_id": None, "limit": MAX_POLLS_PER_TICK}).fetchall()
    except duckdb.Error as exc:
        return dg.SkipReason(f"history not readable now ({type(exc).__name__}); trying again next tick")
    if not pending:
        return dg.SkipReason("no queued scans in the history")
    finished: list[tuple[str, str]] = []
    try:
        with scanning_service.client() as client:
            for sid, pid in pending:
                try:
                    status = client.get_scan(sid).get("status")
                except NotFoundError:
                    finished.append((sid, pid))
                    continue
                except (ServerError, ApiConnectionError, MalformedResponseError) as exc:
                    context.log.warning("scan %s not polled this tick: %s", sid, exc)
                    continue
                if status not in UNFINISHED_SCAN_STATUSES:
                    finished.append((sid, pid))
    except ApiError as exc:  # the credential, plan or rate limit: the same for every scan
        return dg.SkipReason(f"scans not polled: {exc}")
    if not finished:
        return dg.SkipReason(f"{len(pending)} scan(s) still running")
    projects = sorted({pid for _, pid in finished})
    run_key = hashlib.sha256(",".join(sorted(sid for sid, _ in finished)).encode()).hexdigest()[:16]
    return dg.RunRequest(
        run_key=run_key,
        run_config={"ops": {"issues": {"config": {"project_ids": projects}}}},
        tags={"scanwatch/trigger": "scan_finished"},
    )


@dg.run_failure_sensor(default_status=dg.DefaultSensorStatus.RUNNING, minimum_interval_seconds=30)
def snapshot_after_failure(context: dg.RunFailureSensorContext, history: HistoryResource) -> None:
    """Rewrites the metrics snapshot after a failed run, so `secscan_pipeline_last_run_success` and the
    failure counters show the failure now instead of waiting for the next good sync."""
    from pipelines.assets.metrics import refresh_snapshot
    from pipelines.storage import HistoryLockedError

    try:
        with history.get_connection() as conn:
            refresh_snapshot(conn)
    except (HistoryLockedError, duckdb.Error) as exc:
        context.log.warning("snapshot not refreshed after the failed run: %s", exc)
