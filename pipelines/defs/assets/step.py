"""The Dagster side of every ingestion asset: the run's workspace (its partition), its deadline, and the
step of `pipelines/sync/step.py` opened with the run's id, log and the workspace's client. The work itself
(`pipelines/sync/`) takes the client and the history and knows nothing of Dagster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from typing import Any

import dagster as dg

from pipelines.api import ScanningClient
from pipelines.core.settings import DEFAULT_WORKSPACE, Settings
from pipelines.defs.partitions import WORKSPACES_NAME
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.storage.destinations.impl import engine_for
from pipelines.sync.step import Log, Progress, Step, recorded

__all__ = ["OpenStep", "Progress", "Step", "open_step", "partition_workspace", "row_count", "sync_deadline",
           "sync_step"]

# How a step body opens its step: `sync_step` bound to a Dagster run, or `open_step` bound to a CLI run.
OpenStep = Callable[[], AbstractContextManager[Step]]


def sync_deadline(context: dg.AssetExecutionContext | dg.OpExecutionContext, settings: Settings) -> float:
    """When this run must be over (Unix seconds): the run's start plus SCANWATCH_SYNC_DEADLINE_SECONDS, so
    every step of a run, under `scanwatch sync` or a schedule, shares one deadline."""
    return (_run_start(context.instance, context.run.run_id) or time.time()) + settings.sync_deadline_seconds


@lru_cache(maxsize=64)  # a few runs at once (the command's threads): each run's steps and clients ask again
def _run_start(instance: dg.DagsterInstance, run_id: str) -> float | None:
    """The run's start, read from its record once per run rather than at each step and each client (a query
    of Dagster's instance each)."""
    try:
        record = instance.get_run_record_by_id(run_id)
        return record.start_time if record is not None else None
    except Exception:  # a storage without run records: each step's start is the best estimate
        return None


@lru_cache(maxsize=64)
def _known_partition(instance: dg.DagsterInstance, run_id: str, workspace: str) -> None:
    """`workspace` one of the instance's partitions, checked once per run rather than at each step. A run
    started by hand (`dagster job execute --tags ...`) before the workspaces sensor's first tick on this
    instance: the file lists the workspace, so it is one of Dagster's partitions from now on."""
    if not instance.has_dynamic_partition(WORKSPACES_NAME, workspace):
        instance.add_dynamic_partitions(WORKSPACES_NAME, [workspace])


def partition_workspace(context: dg.AssetExecutionContext | dg.OpExecutionContext,
                        service: ScanningServiceResource) -> str:
    """The run's workspace (its partition). A run started without one, as `dagster job execute` does unless
    told, would fail a step later in Dagster's own input loading with a traceback; it stops here instead, with
    one line naming the tag to pass."""
    keys = service.workspace_names()
    named = context.run.tags.get("dagster/partition")
    if named in keys:
        _known_partition(context.instance, context.run.run_id, named)
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
              history: HistoryResource, service: ScanningServiceResource,
              workspace: str | None = None, *, reads_service: bool = True) -> Iterator[Step]:
    """`reads_service` False: a step of the workspace that never calls the service (the snapshot)."""
    with open_step(name, history, service, workspace, run_id=context.run.run_id, log=context.log,
                   deadline=sync_deadline(context, service.settings()), reads_service=reads_service) as step:
        yield step


@contextmanager
def open_step(name: str, history: HistoryResource, service: ScanningServiceResource, workspace: str | None, *,
              run_id: str, log: Log, deadline: float, reads_service: bool = True,
              client: Callable[[], AbstractContextManager[ScanningClient]] | None = None) -> Iterator[Step]:
    """A step of the run `run_id`, whoever runs it (a Dagster run, or `scanwatch sync` without an instance):
    the workspace's client, the step's record in `sync_runs`, and the run's deadline (Unix seconds) held for
    the history too: a PostgreSQL connection of the step that does not answer by then is cut
    (`Engine.deadline`). `client`: how the step gets the run's client, when the run keeps one for its steps;
    else the step opens its own."""
    location, settings = history.location, service.settings()

    def open_client() -> AbstractContextManager[ScanningClient]:
        return client() if client is not None else service.client(workspace, sync_deadline=deadline)

    with engine_for(location).deadline(deadline - time.time(), settings.sync_deadline_seconds, location.masked), \
            recorded(name, history, run_id=run_id, log=log, workspace=workspace,
                     label=settings.workspace(workspace or DEFAULT_WORKSPACE).label,
                     open_client=open_client if reads_service else None) as step:
        yield step


def row_count(metadata: dict[str, Any], rows: int) -> dict[str, Any]:
    """The step's figures with `dagster/row_count`, the key Dagster's UI and its users read a table's size
    from: the rows the table holds for this workspace after the step."""
    return {**metadata, "dagster/row_count": dg.MetadataValue.int(int(rows))}
