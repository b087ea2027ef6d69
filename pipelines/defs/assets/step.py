"""What every ingestion asset does around its own work: open the client of its workspace, time it, count
requests, record the run in `sync_runs` (the exporter's pipeline-health source) and report metadata.

The history is opened only for the moments an asset reads or writes it (`step.db()`), never while it
waits on the service: several workspaces read the API at once, each within its own key's budget, and
take DuckDB's single writer in turn for their merges.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from pipelines.api import PlanRequiredError, ScanningClient
from pipelines.core import milestones
from pipelines.core.settings import Settings
from pipelines.defs.partitions import WORKSPACES_NAME
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.storage import MergeResult, record_sync_run
from pipelines.storage.destinations import Connection
from pipelines.storage.destinations.impl import engine_for
from pipelines.storage.merge import record_api_access_lost
from pipelines.storage.workspaces import current_workspace


@dataclass
class Step:
    client: ScanningClient | None
    history: HistoryResource
    now: datetime
    workspace: str | None = None  # the followed workspace's name (Dagster's partition key)
    label: str | None = None  # its name on metrics; None for the one workspace of the two variables
    metadata: dict[str, Any] = field(default_factory=dict)
    merged: list[MergeResult] = field(default_factory=list)
    _workspace_id: str | None = None
    _looked_up: bool = False
    # the last merge's connection, for the record of the run
    _kept: tuple[AbstractContextManager[Connection], Connection] | None = None

    @contextmanager
    def db(self, *, keep: bool = False) -> Iterator[Connection]:
        """The history, held only for one read or one merge. The first one also looks up the service workspace
        this name follows: each open of a history costs milliseconds (a DuckDB file attached and its schema
        checked, a PostgreSQL session started), several per step. `keep`: the step's last use, a merge after
        which only the record of the run follows, with no wait on the service between: its connection is
        kept for that record rather than closed and opened again."""
        if self._kept is not None:
            holder, conn = self._kept
            self._kept = None
        else:
            holder = self.history.get_connection()
            conn = holder.__enter__()
        try:
            if not self._looked_up:
                self.workspace_id = current_workspace(conn, self.label)
            yield conn
        except BaseException as exc:
            if not holder.__exit__(type(exc), exc, exc.__traceback__):
                raise
            return
        if keep:
            self._kept = (holder, conn)
        else:
            holder.__exit__(None, None, None)

    def release(self) -> None:
        """Close a connection kept by `db(keep=True)` that no record of the run took."""
        if self._kept is not None:
            holder, _ = self._kept
            self._kept = None
            holder.__exit__(None, None, None)

    @property
    def workspace_id(self) -> str | None:
        """The service's id of the followed workspace (None before its first account sync)."""
        if not self._looked_up:
            with self.db():
                pass
        return self._workspace_id

    @workspace_id.setter
    def workspace_id(self, value: str | None) -> None:
        self._workspace_id, self._looked_up = value, True

    @property
    def known_workspace_id(self) -> str:
        """The workspace id a merge writes under: every step after the account asset's has one."""
        workspace_id = self.workspace_id
        if workspace_id is None:
            raise RuntimeError("no account in the history yet: materialize the account asset first")
        return workspace_id

    @property
    def api(self) -> ScanningClient:
        """The workspace's client: a step that reads the service has one."""
        if self.client is None:
            raise RuntimeError("this step does not read the service")
        return self.client

    def named(self, what: str) -> str:
        """A progress line's subject: with several workspaces synced at once, whose it is."""
        return f"{self.label} {what}" if self.label else what

    def add(self, result: MergeResult) -> MergeResult:
        self.merged.append(result)
        return result

    @property
    def rows_written(self) -> int:
        return sum(r.rows_written for r in self.merged)


_progress = logging.getLogger("scanwatch.progress")


class Progress:
    """Per-project progress of a long read, for `scanwatch sync` (stderr) and the Dagster run log."""

    def __init__(self, what: str, total: int, client: ScanningClient):
        self.what, self.total, self.client = what, total, client
        self.done = self.items = 0
        self._lock = threading.Lock()

    def announce(self, expected_requests: int, *, floor: bool = False, window_seconds: float = 60.0) -> None:
        """Say up front how long the rate limit will make this read wait, from the last headers seen."""
        stats = self.client.stats.snapshot()
        limit, remaining = stats.get("last_limit"), stats.get("last_remaining")
        wait = 0.0
        if limit and remaining is not None and expected_requests > remaining:
            wait = (expected_requests - remaining) / limit * window_seconds
        _progress.info("%s: %d projects to read, %s %d requests%s", self.what, self.total,
                       "at least" if floor else "about", expected_requests,
                       f"; at {limit} a minute expect about {wait / 60:.1f} min of waiting for the rate limit"
                       if wait > 0 else "")

    def step(self, items: int) -> None:
        with self._lock:
            self.done += 1
            self.items += items
            stats = self.client.stats.snapshot()
            _progress.info("%s: %d/%d projects, %d read, %d requests, %.0f s waited for the rate limit",
                           self.what, self.done, self.total, self.items, stats["requests"],
                           stats["waited_seconds"])


def sync_deadline(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> float:
    """When this run must be over (Unix seconds): the run's start plus SCANWATCH_SYNC_DEADLINE_SECONDS, so
    every step of a run, under `scanwatch sync` or a schedule, shares one deadline."""
    started = None
    try:
        record = context.instance.get_run_record_by_id(context.run.run_id)
        started = record.start_time if record is not None else None
    except Exception:  # a storage without run records: this step's start is the best estimate
        started = None
    return (started or time.time()) + Settings.load().sync_deadline_seconds


def partition_workspace(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> str:
    """The run's workspace (its partition). A run started without one, as `dagster job execute` does unless
    told, would fail a step later in Dagster's own input loading with a traceback; it stops here instead, with
    one line naming the tag to pass."""
    keys = Settings.load().workspace_names
    named = context.run.tags.get("dagster/partition")
    if named in keys and not context.instance.has_dynamic_partition(WORKSPACES_NAME, named):
        # A run started by hand (`dagster job execute --tags ...`) before the workspaces sensor's first tick
        # on this instance: the file lists the workspace, so it is one of Dagster's partitions from now on.
        context.instance.add_dynamic_partitions(WORKSPACES_NAME, [named])
    if context.has_partition_key:
        return context.partition_key
    raise dg.Failure(
        description=f"{context.run.job_name} runs one workspace: pass --tags "
                    f"'{{\"dagster/partition\": \"{keys[0]}\"}}' to dagster job execute "
                    f"(workspaces: {', '.join(keys[:5])}{f' and {len(keys) - 5} more' if len(keys) > 5 else ''}), "
                    "or run `scanwatch sync`",
        allow_retries=False)


@contextmanager
def sync_step(context: dg.AssetExecutionContext | dg.OpExecutionContext, name: str,
              history: HistoryResource, service: ScanningServiceResource | None,
              workspace: str | None = None, *, reads_service: bool = True) -> Iterator[Step]:
    """`reads_service` False: a step of the workspace that never calls the service (the snapshot).

    The run's deadline holds for the history too: a PostgreSQL connection of the step that does not answer by
    then is cut (`Engine.deadline`), however the run was launched."""
    location = history.location
    with engine_for(location).deadline(sync_deadline(context) - time.time(), Settings.load().sync_deadline_seconds,
                                       location.masked), \
            _sync_step(context, name, history, service, workspace, reads_service=reads_service) as step:
        yield step


@contextmanager
def _sync_step(context: dg.AssetExecutionContext | dg.OpExecutionContext, name: str,
               history: HistoryResource, service: ScanningServiceResource | None,
               workspace: str | None, *, reads_service: bool) -> Iterator[Step]:
    started = datetime.now(UTC)
    label = service.workspace(workspace).label if service is not None else None
    step = Step(client=None, history=history, now=started, workspace=workspace, label=label)
    stats: dict[str, Any] = {}
    try:
        if service is None or not reads_service:
            yield step
        else:
            with service.client(workspace, sync_deadline=sync_deadline(context)) as client:
                step.client = client
                try:
                    yield step
                finally:
                    stats = client.stats.snapshot()
    except BaseException as exc:
        if not isinstance(exc, Exception):
            step.release()
            raise
        try:  # best effort: the failure itself must surface even if the history cannot take the row
            with step.db() as conn:
                if isinstance(exc, PlanRequiredError) and step.workspace_id:
                    record_api_access_lost(conn, step.workspace_id, datetime.now(UTC))
                record_sync_run(conn, workspace_id=step.workspace_id, workspace_label=label,
                                run_id=context.run.run_id, asset=name, started_at=started,
                                finished_at=datetime.now(UTC), status="failure", stats=stats,
                                error=f"{type(exc).__name__}: {exc}")
        except Exception:
            context.log.warning("could not record the failed run of %s in sync_runs", name)
        raise
    finished = datetime.now(UTC)
    with step.db() as conn:
        record_sync_run(conn, workspace_id=step.workspace_id, workspace_label=label, run_id=context.run.run_id,
                        asset=name, started_at=started, finished_at=finished, status="success", stats=stats,
                        rows_written=step.rows_written)
    milestones.reached("step.recorded")
    for notice in (n for r in step.merged for n in r.notices):
        context.log.warning(notice)
    warnings = [w for r in step.merged for w in r.warnings]
    step.metadata.update({
        "rows_written": step.rows_written,
        "requests": stats.get("requests", 0),
        "retries": stats.get("retries", 0),
        "rate_limited_429s": stats.get("rate_limited", 0),
        "rate_limit_remaining": stats.get("last_remaining"),
        "waited_seconds": round(float(stats.get("waited_seconds") or 0.0), 3),
        "duration_seconds": round((finished - started).total_seconds(), 3),
        "warnings": len(warnings),
    })
    step.metadata = {k: v for k, v in step.metadata.items() if v is not None}
