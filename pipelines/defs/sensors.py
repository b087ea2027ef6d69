"""Refresh a project soon after one of its scans finishes, instead of waiting for the next schedule tick; and
follow the workspaces file's list of workspaces as Dagster's partitions while scanwatch runs."""

import hashlib
import time
from collections.abc import Collection, Mapping
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

MAX_POLLS_PER_TICK = 20  # bounded: the sensor must not eat the rate limit the schedules need
# Dagster stops a sensor tick at 60 s. The history is read once for every workspace; the workspaces with
# queued scans are then polled at once, each within this budget (its requests time out inside it, and none
# starts past it), so a tick ends in about 20 s whatever one workspace's service does, and a slow workspace
# never costs another its run request.
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
    refresh. The history is read once for every workspace; those with queued scans are polled at once, each
    within its own 20 s budget: a slow, failing or refused workspace is one skip line of its own and never
    delays another's run request, nor the tick past Dagster's limit, however many workspaces are followed."""
    names = followed_workspaces(context.instance, scanning_service.workspace_names())
    busy = _workspaces_with_a_run(context.instance)
    deadline = time.time() + WORKSPACE_BUDGET_SECONDS
    labels: dict[str, str | None] = {}
    found_by: dict[str, Found | str] = {}
    for name in names:
        try:
            labels[name] = scanning_service.workspace(name).label
        except ConfigError as exc:  # this workspace's entry is broken: the others are looked at anyway
            found_by[name] = f"not polled: {exc}"
    looked = pending_in_history(history, labels, min(deadline, time.time() + LOCK_WAIT_SECONDS), busy)
    if isinstance(looked, str):
        return dg.SkipReason(looked)
    to_poll = {}
    for name, seen in looked.items():
        if isinstance(seen, str):
            found_by[name] = seen
        elif seen.scans:
            to_poll[name] = seen
        else:
            found_by[name] = seen if seen.behind else "no queued scans in the history"
    futures = {}
    if to_poll:  # only the workspaces with queued scans send requests, each with its own key and budget
        pool = ThreadPoolExecutor(max_workers=min(len(to_poll), MAX_WORKSPACES_AT_ONCE),
                                  thread_name_prefix="scan-poll")
        try:
            futures = {name: pool.submit(_finished_in, context, scanning_service, name, seen, deadline)
                       for name, seen in to_poll.items()}
            wait(futures.values(), timeout=WORKSPACE_BUDGET_SECONDS + 5)  # a last answer may still be arriving
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
    for name, future in futures.items():
        if future.cancelled() or not future.done():
            found_by[name] = (f"not polled within its {WORKSPACE_BUDGET_SECONDS:g} s budget (a slow service); "
                              "polled again next tick")
        elif future.exception() is not None:
            found_by[name] = f"not polled: {type(future.exception()).__name__}: {future.exception()}"
        else:
            found_by[name] = future.result()
    requests: list[dg.RunRequest] = []
    waiting: dict[str, list[str]] = {}  # why -> the workspaces it holds
    for workspace in names:
        found = found_by[workspace]
        if isinstance(found, str):
            waiting.setdefault(found, []).append(workspace)
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
    lines = [f"{_named(held)}: {why}" for why, held in waiting.items()]
    for line in lines if requests else []:  # with runs requested, the skip reason is not shown: log it
        context.log.info(line)
    return requests or dg.SkipReason("; ".join(lines))


def _named(workspaces: list[str], shown: int = 5) -> str:
    """The workspaces a reason holds, the first few by name: a thousand workspaces with no queued scan are one
    line of the tick, not a thousand."""
    more = len(workspaces) - shown
    return ", ".join(workspaces[:shown]) + (f" and {more} more workspaces" if more > 0 else "")


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


def pending_in_history(history: HistoryResource, labels: Mapping[str, str | None], wait_until: float,
                       busy: Collection[str]) -> dict[str, Found | str] | str:
    """What each followed workspace (name -> its label) holds: its queued scans and, unless a run of it is
    `busy`, its projects whose issues are behind their scans (`Found`), or why there is nothing to look at;
    or, for all of them, why the history cannot be read now. One read-only statement for every workspace
    (sync/pending_by_workspace.sql): a connection and three statements apiece outlasted a tick at a thousand
    workspaces. A DuckDB file a run's step holds is waited for until `wait_until`."""
    key = {name: label or "" for name, label in labels.items()}
    try:
        with reader(history.location, wait_seconds=max(0.0, wait_until - time.time())) as conn:
            rows = conn.execute(read_sql("sync/pending_by_workspace.sql"), {
                "labels": sorted(set(key.values())), "idle": sorted({key[n] for n in key if n not in busy}),
                "limit": MAX_POLLS_PER_TICK}).fetchall()
    except HistoryLockedError:
        return "history not readable now (a run is writing it); trying again next tick"
    except HistoryError as exc:  # the engine's own errors, whichever engine (a driver's are mapped to them)
        return f"history not readable now ({type(exc).__name__}); trying again next tick"
    held: dict[str, Found] = {label: Found([], []) for kind, label, *_ in rows if kind == "known"}
    for kind, label, first, second, _turn in rows:
        if kind == "scan":
            held[label].scans.append((first, second))
        elif kind == "behind":
            held[label].behind.append((first, second))
    return {name: held.get(label, "no history of this workspace yet") for name, label in key.items()}


def _finished_in(context: dg.SensorEvaluationContext, service: ScanningServiceResource, workspace: str,
                 held: Found, deadline: float) -> Found | str:
    """Which of the workspace's queued scans (`held.scans`) have finished (or vanished), with its projects
    whose issues are behind their scans, or why there is nothing to ask for; no request starts past
    `deadline`, and none waits past it."""
    pending, behind = held
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
