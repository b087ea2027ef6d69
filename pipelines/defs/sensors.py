"""Refresh a project soon after one of its scans finishes, instead of waiting for the next schedule tick; and
follow the workspaces file's list of workspaces as Dagster's partitions while scanwatch runs."""

import hashlib
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import NamedTuple

import dagster as dg
from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES

from pipelines.api import (
    ApiConnectionError,
    ApiError,
    DeadlineExceededError,
    MalformedResponseError,
    NotFoundError,
    ServerError,
)
from pipelines.core.settings import ConfigError
from pipelines.core.sqlfiles import read_sql
from pipelines.core.vocabulary import UNFINISHED_SCAN_STATUSES
from pipelines.defs.jobs import project_refresh_job
from pipelines.defs.partitions import WORKSPACES, followed_workspaces, partition_changes
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.storage import HistoryError, HistoryLockedError, reader
from pipelines.storage.workspaces import current_workspace

MAX_POLLS_PER_TICK = 20  # bounded: the sensor must not eat the rate limit the schedules need
# Dagster stops a sensor tick at 60 s. Every workspace is polled at once, each within this budget (its
# requests time out inside it, and none starts past it), so a tick ends in about 20 s whatever one
# workspace's service does, and a slow workspace never costs another its run request.
WORKSPACE_BUDGET_SECONDS = 20.0
MAX_WORKSPACES_AT_ONCE = 32
# A run writing a DuckDB history holds its file for one step's transaction at a time: the look at the queued
# scans waits that long within the budget rather than skip the tick, and with it a minute in which a
# schedule's run may settle the finished scan first.
LOCK_WAIT_SECONDS = 5.0


@dg.sensor(job=project_refresh_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def scan_finished_sensor(
    context: dg.SensorEvaluationContext, scanning_service: ScanningServiceResource, history: HistoryResource
) -> list[dg.RunRequest] | dg.SkipReason:
    """Polls the scans the history still holds as queued or running (one request each, at most 20 a minute per
    workspace, each with its own key) and asks for a refresh of the projects whose scans have finished. A
    scan that answers 404 asks for one too: the refresh settles it as gone, and nothing polls it again. So do
    the projects whose scans a run has read since they moved but whose issues it has not (the hourly scans run
    settled a scan that finished between two ticks): their new issues come within a minute, not at the next
    refresh. Every workspace is polled at once within its own 20 s budget: a slow, failing or refused
    workspace is one skip line of its own and never delays another's run request, nor the tick past Dagster's
    limit."""
    names = followed_workspaces(context.instance, scanning_service.workspace_names())
    busy = _workspaces_with_a_run(context.instance)
    deadline = time.time() + WORKSPACE_BUDGET_SECONDS
    pool = ThreadPoolExecutor(max_workers=min(len(names), MAX_WORKSPACES_AT_ONCE), thread_name_prefix="scan-poll")
    try:
        futures = {name: pool.submit(_finished_in, context, scanning_service, history, name, deadline,
                                     name in busy)
                   for name in names}
        wait(futures.values(), timeout=WORKSPACE_BUDGET_SECONDS + 5)  # a last answer may still be arriving
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    requests, waiting = [], []
    for workspace, future in futures.items():
        if future.cancelled() or not future.done():
            found: Found | str = (f"not polled within its {WORKSPACE_BUDGET_SECONDS:g} s budget "
                                                  "(a slow service); polled again next tick")
        elif future.exception() is not None:
            found = f"not polled: {type(future.exception()).__name__}: {future.exception()}"
        else:
            found = future.result()
        if isinstance(found, str):
            waiting.append(f"{workspace}: {found}")
            continue
        projects = sorted({pid for _, pid in found.scans} | {pid for pid, _ in found.behind})
        # One run per finished scan set and per move: Dagster never launches a run key twice.
        keys = sorted(sid for sid, _ in found.scans) + sorted(f"{pid}@{fp}" for pid, fp in found.behind)
        run_key = hashlib.sha256(",".join(keys).encode()).hexdigest()[:16]
        requests.append(dg.RunRequest(
            run_key=f"{workspace}-{run_key}", partition_key=workspace,
            run_config={"ops": {"scans": {"config": {"project_ids": projects}},
                                "issues": {"config": {"project_ids": projects}}}},
            tags={"scanwatch/trigger": "scan_finished" if found.scans else "issues_behind_scans"},
        ))
    for line in waiting if requests else []:  # with runs requested, the skip reason is not shown: log it
        context.log.info(line)
    return requests or dg.SkipReason("; ".join(waiting))


class Found(NamedTuple):
    """What asks for a workspace's refresh: (scan, project) of its finished scans, and (project, fingerprint)
    of the projects whose issues are behind their scans."""

    scans: list[tuple[str, str]]
    behind: list[tuple[str, str]]


def _workspaces_with_a_run(instance: dg.DagsterInstance) -> set[str]:
    """Workspaces with a run not finished (Dagster's own set: queued, starting, under way, suspended, canceling).
    Such a run reads the projects it moves itself: the projects it has moved but not yet read the issues of are
    not asked for again while it runs."""
    records = instance.get_run_records(dg.RunsFilter(statuses=list(NOT_FINISHED_STATUSES)))
    return {name for r in records if (name := r.dagster_run.tags.get("dagster/partition")) is not None}


def pending_in_history(history: HistoryResource, label: str | None, wait_until: float,
             busy: bool) -> tuple[list[tuple[str, str]], list[tuple[str, str]]] | str:
    """The workspace's queued scans as the history holds them, and (unless a run of it is `busy`) its projects
    whose issues are behind their scans; read-only and brief. A DuckDB file a run's step holds is waited for
    until `wait_until`."""
    try:
        with reader(history.location, wait_seconds=max(0.0, wait_until - time.time())) as conn:
            workspace_id = current_workspace(conn, label)
            if workspace_id is None:  # never read yet; a None here would match every workspace's scans
                return "no history of this workspace yet"
            scans = conn.execute(read_sql("sync/pending_scans.sql"),
                                 {"workspace_id": workspace_id, "limit": MAX_POLLS_PER_TICK}).fetchall()
            behind = [] if busy else conn.execute(read_sql("sync/issues_behind_scans.sql"),
                                                  {"workspace_id": workspace_id}).fetchall()
            return [tuple(r) for r in scans], [tuple(r) for r in behind]
    except HistoryLockedError:
        return "history not readable now (a run is writing it); trying again next tick"
    except HistoryError as exc:  # the engine's own errors, whichever engine (a driver's are mapped to them)
        return f"history not readable now ({type(exc).__name__}); trying again next tick"


def _finished_in(context: dg.SensorEvaluationContext, service: ScanningServiceResource, history: HistoryResource,
                 workspace: str, deadline: float, busy: bool) -> Found | str:
    """This workspace's queued scans that have finished (or vanished) and its projects whose issues are behind
    their scans, or why there is nothing to ask for; no request starts past `deadline`, and none waits past it."""
    looked = pending_in_history(history, service.workspace(workspace).label,
                                min(deadline, time.time() + LOCK_WAIT_SECONDS), busy)
    if isinstance(looked, str):
        return looked
    pending, behind = looked
    if not pending:
        return Found([], behind) if behind else "no queued scans in the history"
    finished: list[tuple[str, str]] = []
    polled = 0
    try:
        with service.client(workspace, sync_deadline=deadline) as client:
            for sid, pid in pending:
                if time.time() >= deadline:
                    break
                try:
                    status = client.get_scan(sid).get("status")
                except NotFoundError:
                    status = None  # vanished: the refresh settles it as gone
                except DeadlineExceededError:  # the budget ran out during this poll
                    break
                except (ServerError, ApiConnectionError, MalformedResponseError) as exc:
                    context.log.warning("workspace %s: scan %s not polled this tick: %s", workspace, sid, exc)
                    polled += 1
                    continue
                polled += 1
                if status not in UNFINISHED_SCAN_STATUSES:
                    finished.append((sid, pid))
    except ApiError as exc:  # the credential, plan or rate limit of this workspace: the others are polled anyway
        return f"scans not polled: {exc}"
    if finished or behind:
        return Found(finished, behind)
    if polled < len(pending):
        return (f"{len(pending) - polled} of {len(pending)} queued scan(s) not polled within the "
                f"{WORKSPACE_BUDGET_SECONDS:g} s budget; polled again next tick")
    return f"{len(pending)} scan(s) still running"


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def workspaces_sensor(context: dg.SensorEvaluationContext,
                      scanning_service: ScanningServiceResource) -> dg.SensorResult | dg.SkipReason:
    """Reads the workspaces file at each tick and makes Dagster's workspace partitions follow it: a name
    added to the file becomes a partition (the schedules refresh it from their next tick), a name removed
    stops being one (no schedule or sensor polls it again; its history and past runs are kept). A file that
    cannot be read or checked changes nothing: one skip line says why, and every workspace stays followed."""
    try:
        names = scanning_service.workspace_names()
    except ConfigError as exc:
        return dg.SkipReason(f"workspaces file not followed this tick, partitions unchanged: {exc}")
    added, removed = partition_changes(context.instance, names)
    if not added and not removed:
        return dg.SkipReason(f"{len(names)} workspace(s) followed, none added or removed")
    for line in ([f"workspace {n} added" for n in added[:20]] + [f"workspace {n} removed: its history is kept, "
                                                                   "it is no longer polled" for n in removed[:20]]):
        context.log.info(line)
    return dg.SensorResult(dynamic_partitions_requests=[
        *([WORKSPACES.build_add_request(added)] if added else []),
        *([WORKSPACES.build_delete_request(removed)] if removed else [])])


@dg.run_failure_sensor(default_status=dg.DefaultSensorStatus.RUNNING, minimum_interval_seconds=30)
def snapshot_after_failure(context: dg.RunFailureSensorContext, history: HistoryResource,
                           scanning_service: ScanningServiceResource) -> None:
    """Rewrites the failed run's workspace's part of the metrics snapshot, so
    `secscan_pipeline_last_run_success` and the failure counters show the failure now instead of waiting for
    the next good sync; the other workspaces' parts are left as they are."""
    from pipelines.sync.snapshot import refresh_after_failure

    workspace = context.dagster_run.tags.get("dagster/partition")
    try:
        label = scanning_service.workspace(workspace).label
    except ConfigError as exc:
        context.log.warning("snapshot not refreshed after the failed run: %s", exc)
        return
    reason = refresh_after_failure(history.location, label, found=history.settings(), workspace=workspace)
    if reason is not None:
        context.log.warning("snapshot not refreshed after the failed run: %s", reason)
