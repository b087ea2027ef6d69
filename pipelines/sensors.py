"""Refresh a project soon after one of its scans finishes, instead of waiting for the next schedule tick."""

import hashlib

import dagster as dg
import duckdb

from pipelines.api import ApiConnectionError, ApiError, MalformedResponseError, NotFoundError, ServerError
from pipelines.assets.step import current_workspace
from pipelines.jobs import project_refresh_job
from pipelines.partitions import WORKSPACES
from pipelines.resources import HistoryResource, ScanningServiceResource
from pipelines.sqlfiles import read_sql
from pipelines.storage import HistoryUnavailableError, reader
from pipelines.vocabulary import UNFINISHED_SCAN_STATUSES

MAX_POLLS_PER_TICK = 20  # bounded: the sensor must not eat the rate limit the schedules need


@dg.sensor(job=project_refresh_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def scan_finished_sensor(
    context: dg.SensorEvaluationContext, scanning_service: ScanningServiceResource, history: HistoryResource
):
    """Polls the scans the history still holds as queued or running (one request each, at most 20 a minute per
    workspace, each with its own key) and asks for a refresh of the projects whose scans have finished. A
    scan that answers 404 asks for one too: the refresh settles it as gone, and nothing polls it again. One
    bad scan never stops the others, and a refused credential or plan is one skip line for its workspace,
    never a failed tick nor a stop for the other workspaces."""
    requests, waiting = [], []
    for workspace in WORKSPACES.get_partition_keys():
        found = _finished_in(context, scanning_service, history, workspace)
        if isinstance(found, str):
            waiting.append(f"{workspace}: {found}")
            continue
        projects = sorted({pid for _, pid in found})
        run_key = hashlib.sha256(",".join(sorted(sid for sid, _ in found)).encode()).hexdigest()[:16]
        requests.append(dg.RunRequest(
            run_key=f"{workspace}-{run_key}", partition_key=workspace,
            run_config={"ops": {"issues": {"config": {"project_ids": projects}}}},
            tags={"scanwatch/trigger": "scan_finished"},
        ))
    return requests or dg.SkipReason("; ".join(waiting))


def _finished_in(context: dg.SensorEvaluationContext, service: ScanningServiceResource, history: HistoryResource,
                 workspace: str) -> list[tuple[str, str]] | str:
    """This workspace's queued scans that have finished (or vanished), or why there is nothing to ask for."""
    label = service.workspace(workspace).label
    try:
        # Read-only and brief: a run writing a DuckDB history holds its lock, and then this tick just waits.
        with reader(history.location) as conn:
            workspace_id = current_workspace(conn, label)
            if workspace_id is None:  # never read yet; a None here would match every workspace's scans
                return "no history of this workspace yet"
            pending = conn.execute(read_sql("sync/pending_scans.sql"),
                                   {"workspace_id": workspace_id, "limit": MAX_POLLS_PER_TICK}).fetchall()
    except (duckdb.Error, HistoryUnavailableError) as exc:
        return f"history not readable now ({type(exc).__name__}); trying again next tick"
    if not pending:
        return "no queued scans in the history"
    finished: list[tuple[str, str]] = []
    try:
        with service.client(workspace) as client:
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
    except ApiError as exc:  # the credential, plan or rate limit of this workspace: the others are polled anyway
        return f"scans not polled: {exc}"
    return finished or f"{len(pending)} scan(s) still running"


@dg.run_failure_sensor(default_status=dg.DefaultSensorStatus.RUNNING, minimum_interval_seconds=30)
def snapshot_after_failure(context: dg.RunFailureSensorContext, history: HistoryResource) -> None:
    """Rewrites the metrics snapshot after a failed run, so `secscan_pipeline_last_run_success` and the
    failure counters show the failure now instead of waiting for the next good sync."""
    from pipelines.snapshot import refresh_snapshot
    from pipelines.storage import HistoryLockedError

    try:
        with history.get_connection() as conn:
            refresh_snapshot(conn)
    except (HistoryLockedError, duckdb.Error) as exc:
        context.log.warning("snapshot not refreshed after the failed run: %s", exc)
