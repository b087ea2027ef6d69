"""Scheduled refreshes in batches: a tick of N workspaces can cost N / K run processes instead of N.

A run process pays seconds of CPU before its first step (Python, the imports of Dagster and scanwatch,
the run's set-up), more than an unchanged workspace's own work (`python -m benchmarks.dagster_refresh`,
docs/benchmarks.md). With `SCANWATCH_REFRESH_BATCH=K` a schedule's tick asks for one `batch_job` run per K
workspaces, and that run refreshes each of its workspaces as a run of its own: each workspace's run carries
its partition, so it fails alone, shows alone in the partition view (and to the run-failure sensor, which
rewrites that workspace's part of the snapshot), and can be re-run alone. A few run at once, so a slow
workspace holds up only its own worker.

The workers are processes forked from one that imported Dagster and scanwatch once, not threads: Dagster
reconfigures Python's logging whenever a run starts on a persistent instance, which deadlocks against
another thread's run logging at that moment (seen within seconds with two threads).
"""

from concurrent.futures import ProcessPoolExecutor
from functools import cache
from typing import Any

import dagster as dg

from pipelines.core.processes import fork_server
from pipelines.defs.partitions import register

AT_ONCE = 4  # workspaces of one batch refreshed at once
# A worker's connections to Dagster's database, with the defaults of Dagster's webserver: the kept one is
# replaced after an hour; nested statements may open up to 20 more for a moment, closed once used.
POOL_RECYCLE_SECONDS = 3600
POOL_OVERFLOW = 20


class BatchConfig(dg.Config):
    workspaces: list[str]
    job_name: str = "refresh_job"  # the partitioned job each workspace's run executes
    tick: str = ""  # the schedule tick, for the workspaces' runs' tags


@cache
def _job(name: str) -> dg.JobDefinition:
    from pipelines.definitions import defs  # the code location's own job, its resources bound

    return defs().resolve_job_def(name)


# The worker's instance: made at its first workspace's run and kept for every run it executes after.
_instance: dg.DagsterInstance | None = None


def _worker_instance(ref: Any) -> dg.DagsterInstance:
    """The worker's instance, whose storages each keep one database connection for all its runs.

    Dagster's PostgreSQL storages open a connection per statement by default (no pool), and a workspace's run
    makes over 200 of them (its events, the partition and data-version lookups, its run record): measured on
    the deployment's instance, each workspace's run cost the instance's server 1.7 CPU-s of connection set-up
    against 0.07 s of statements, and the run's process a third of its CPU (`python -m
    benchmarks.dagster_refresh`, docs/benchmarks.md). A connection kept per storage is what Dagster's webserver
    does for the same reason; a storage without connections (SQLite) ignores it. No statement timeout: a
    run's writes had none before either."""
    global _instance
    if _instance is None:
        instance = dg.DagsterInstance.from_ref(ref)
        instance.optimize_for_webserver(statement_timeout=0, pool_recycle=POOL_RECYCLE_SECONDS,
                                        max_overflow=POOL_OVERFLOW)
        _instance = instance
    return _instance


def _run_workspace(ref: Any, job_name: str, workspace: str, tags: dict[str, str]) -> bool | str:
    """In a worker: the workspace's run, recorded in the instance `ref` names; its success, or why it did
    not start (an instance that cannot be reached fails the workspace's run, not the batch)."""
    try:
        return _job(job_name).execute_in_process(instance=_worker_instance(ref), partition_key=workspace,
                                                 tags=tags, raise_on_error=False).success
    except Exception as exc:  # a run that could not start: this workspace's, not the batch's
        return f"{type(exc).__name__}: {exc}"


@dg.op(description="Runs the job of each workspace of the batch, each as a run of its own.")
def refresh_batch(context: dg.OpExecutionContext, config: BatchConfig) -> dg.Output[None]:
    if context.instance.is_ephemeral:
        raise dg.Failure("a batch records its workspaces' runs in Dagster's instance: set DAGSTER_HOME",
                         allow_retries=False)
    register(context.instance, config.workspaces)  # a batch launched by hand names partitions Dagster may lack
    tags = {"scanwatch/trigger": "schedule", "scanwatch/batch": context.run_id,
            **({"scanwatch/tick": config.tick} if config.tick else {})}
    # Never fork this process (Dagster runs threads in it): a fork server, started clean, imports Dagster and
    # scanwatch once and forks each worker from there.
    ref = context.instance.get_ref()
    names = config.workspaces
    with fork_server(["pipelines.defs.batches", "pipelines.definitions"]) as mp, \
            ProcessPoolExecutor(max_workers=max(1, min(AT_ONCE, len(names))), mp_context=mp) as pool:
        done = pool.map(_run_workspace, [ref] * len(names), [config.job_name] * len(names), names,
                        [tags] * len(names))
        outcomes = dict(zip(names, done, strict=True))
    failed = [name for name, ok in outcomes.items() if ok is not True]
    for name in failed:
        why = outcomes[name] if isinstance(outcomes[name], str) else "its own run in the run list says why"
        context.log.warning("workspace %s: its run failed (%s)", name, why)
    return dg.Output(None, metadata={"workspaces": len(config.workspaces), "failed": len(failed),
                                     "failed_workspaces": ", ".join(failed[:20]) or "none"})


@dg.job(description="A batch of workspaces, each refreshed as a run of its own (SCANWATCH_REFRESH_BATCH).")
def batch_job() -> None:
    refresh_batch()


def batched(names: list[str], size: int) -> list[list[str]]:
    """`names` in batches of at most `size`, in the file's order."""
    size = max(1, size)
    return [names[i:i + size] for i in range(0, len(names), size)]
