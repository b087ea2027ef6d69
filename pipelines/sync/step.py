"""What every ingestion step does around its own work, whoever runs it (a Dagster asset, a test): hold the
client of its workspace, time it, count requests, record the step in `sync_runs` (the exporter's
pipeline-health source) and gather its metadata.

The history is opened only for the moments a step reads or writes it (`step.db()`), never while it waits on
the service: several workspaces read the API at once, each within its own key's budget, and take DuckDB's
single writer in turn for their merges. Nothing here knows Dagster: the caller hands in the run's id, a log
and the client, and turns the metadata into its own events.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from pipelines.api import PlanRequiredError, ScanningClient
from pipelines.core import milestones
from pipelines.core.sqlfiles import read_sql
from pipelines.storage import MergeResult, record_sync_run
from pipelines.storage.destinations import Connection
from pipelines.storage.merge import record_api_access_lost
from pipelines.storage.workspaces import current_workspace


class History(Protocol):
    """Where a step's connections come from: the Dagster resource, or anything with the same method."""

    def get_connection(self) -> AbstractContextManager[Connection]: ...


class Log(Protocol):
    """The step's log: Dagster's run log or a `logging.Logger`."""

    def info(self, msg: str, *args: Any) -> None: ...

    def warning(self, msg: str, *args: Any) -> None: ...


@dataclass
class Step:
    client: ScanningClient | None
    history: History
    now: datetime
    log: Log = field(default_factory=lambda: logging.getLogger("scanwatch.sync"))
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
    def service(self) -> ScanningClient:
        """The client of a step that reads the service (every step but the snapshot)."""
        if self.client is None:
            raise RuntimeError("this step was started without a client of the service")
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


def row_counts(conn: Connection, workspace_id: str | None) -> dict[str, int]:
    """The rows each ingestion table holds for the workspace (`sql/sync/row_counts.sql`): a step's report of
    its table's size, read on the connection of its merge."""
    cursor = conn.execute(read_sql("sync/row_counts.sql"), {"workspace_id": workspace_id})
    return dict(zip((c[0] for c in cursor.description), (int(v or 0) for v in cursor.fetchall()[0]), strict=True))


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


@contextmanager
def recorded(name: str, history: History, *, run_id: str, log: Log, label: str | None,
             workspace: str | None = None,
             open_client: Callable[[], AbstractContextManager[ScanningClient]] | None = None) -> Iterator[Step]:
    """A step named `name` of the workspace followed as `label`, recorded in `sync_runs` under `run_id` as a
    success or a failure (the failure re-raised); `open_client` None: a step that never calls the service
    (the snapshot). On success `step.metadata` holds the step's figures, under the keys every step shares."""
    started = datetime.now(UTC)
    step = Step(client=None, history=history, now=started, log=log, workspace=workspace, label=label)
    stats: dict[str, Any] = {}
    try:
        if open_client is None:
            yield step
        else:
            with open_client() as client:
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
                                run_id=run_id, asset=name, started_at=started,
                                finished_at=datetime.now(UTC), status="failure", stats=stats,
                                error=f"{type(exc).__name__}: {exc}")
        except Exception:
            log.warning("could not record the failed run of %s in sync_runs", name)
        raise
    finished = datetime.now(UTC)
    with step.db() as conn:
        record_sync_run(conn, workspace_id=step.workspace_id, workspace_label=label, run_id=run_id,
                        asset=name, started_at=started, finished_at=finished, status="success", stats=stats,
                        rows_written=step.rows_written)
    milestones.reached("step.recorded")
    for notice in (n for r in step.merged for n in r.notices):
        log.warning(notice)
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
