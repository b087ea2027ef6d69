"""Run every asset once, as the schedules would, and gather what the CLI reports.

One run per followed workspace, several at once: each key has its own rate-limit budget, so K workspaces
take about as long as the slowest one; their merges take DuckDB's writer in turn. With `DAGSTER_HOME` each
run is a Dagster run of `sync_job` (its partition the workspace), a process of its own recording into that
instance, as the schedules' runs do: in-process runs sharing its SQLite storage from several threads were
seen to deadlock. Without it nothing would keep a Dagster run, and the runs are the assets' own steps in the
job's order (`workspace_run`), in this process: a few threads, each taking the next workspace when its run
ends, holding nothing of it afterwards, so memory stays flat in the number of workspaces; on a history that
takes many writers at once (PostgreSQL), one such process per core once there are enough workspaces, all
taking from one queue.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.queues
import os
import queue
import signal
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import dagster as dg

from pipelines.commands.workspace_run import Resources, resources, run_workspace
from pipelines.core.processes import fork_server
from pipelines.defs.assets import ALL_ASSETS
from pipelines.defs.checks import history_checks
from pipelines.defs.jobs import sync_job
from pipelines.defs.partitions import register
from pipelines.defs.resources import default_resources

# With DAGSTER_HOME each run is a process holding its own Dagster and DuckDB (about 250 MB): at most this many
# at once, so a workspace waits for a process only behind 8 others still running.
MAX_RUN_PROCESSES = 8
# Without it, runs are threads of this process: at most this many at once. A run of an unchanged workspace is
# mostly this process's own CPU (Dagster's events, the merges), which more threads would only share; a
# thousand threads, one per workspace, held a thousand runs' state at once (742 MiB for 200 workspaces).
MAX_RUN_THREADS = 8


class ErrorChain(Protocol):
    """A failed step's error as Dagster reports it (its SerializableErrorInfo): the message and class of each
    exception, from Dagster's wrapper down to the user's."""

    @property
    def message(self) -> str: ...

    @property
    def cls_name(self) -> str | None: ...

    @property
    def cause(self) -> ErrorChain | None: ...


@dataclass
class Outcome:
    success: bool
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed_step: str | None = None
    error: ErrorChain | None = None
    failed_checks: list[str] = field(default_factory=list)
    run_id: str | None = None
    warnings: list[str] = field(default_factory=list)  # what the assets logged as warnings
    workspace: str | None = None
    parts: list[Outcome] = field(default_factory=list)  # one per workspace when several were synced

    @classmethod
    def combine(cls, parts: list[Outcome]) -> Outcome:
        if len(parts) == 1:
            return parts[0]
        failed = [p for p in parts if not p.success]
        return cls(
            success=not failed, parts=parts,
            metadata={f"{p.workspace}/{asset}": meta for p in parts for asset, meta in p.metadata.items()},
            failed_step=f"{failed[0].workspace}/{failed[0].failed_step}" if failed else None,
            error=failed[0].error if failed else None,
            failed_checks=[f"{p.workspace}/{c}" for p in parts for c in p.failed_checks],
            warnings=[f"{p.workspace}: {w}" for p in parts for w in p.warnings],
        )


def _value(v: object) -> object:
    return getattr(v, "value", v)


def materialize_all(*, workspace: str | None = None, full_reconcile: bool = False,
                    console_level: str = "WARNING") -> Outcome:
    """One run of every asset and check per workspace (all followed ones, or the one named), at once.
    `console_level` is Dagster's console logger threshold: the CLI raises it to CRITICAL, because Dagster
    logs a failed step as ERROR with its whole stack trace, and prints the assets' warnings
    (`Outcome.warnings`) and the one-line reason itself."""
    from pipelines.core.settings import Settings

    names = [workspace] if workspace else Settings.load().workspace_names
    if os.environ.get("DAGSTER_HOME"):
        if len(names) == 1:  # in the main thread, where Ctrl-C lands in the run itself
            return _materialize_workspace(names[0], full_reconcile, console_level)
        return Outcome.combine(_in_processes(names, full_reconcile, console_level))
    if len(names) == 1:
        return _run_workspace(names[0], full_reconcile, quiet=_quiet(console_level))
    # Dagster's compute-log capture swaps file descriptors 1 and 2 for each step and puts back what it
    # found; steps of concurrent runs interleave, so the last one may "restore" another's capture file.
    # The terminal's descriptors are put back here, whatever order the runs ended in.
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    processes = _run_processes(len(names))
    try:
        parts = (_in_threads(names, full_reconcile, console_level) if processes == 1
                 else _in_thread_processes(names, full_reconcile, console_level, processes))
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
    return Outcome.combine(parts)


def _run_processes(count: int) -> int:
    """How many processes share `count` workspaces' runs (each running MAX_RUN_THREADS at once): one where the
    history takes one writer at a time (a DuckDB file: its writers must be threads of one process), else one
    per core, as long as each has MAX_RUN_THREADS workspaces to run. The runs' Python (Dagster's events, the
    steps) holds the interpreter's lock: one process used one core of the machine, its database's work aside."""
    from pipelines.core.settings import Settings
    from pipelines.storage.destinations.impl import engine_for

    settings = Settings.load()
    if engine_for(settings.history).capabilities.single_writer:
        return 1
    if settings.sync_processes is not None:
        return max(1, min(settings.sync_processes, count))
    return max(1, min(os.cpu_count() or 1, MAX_RUN_PROCESSES, count // MAX_RUN_THREADS))


def _in_threads(names: list[str], full_reconcile: bool, console_level: str) -> list[Outcome]:
    """At most MAX_RUN_THREADS runs at once, each thread taking the next workspace when its run ends. Ctrl-C
    stops the threads from starting another run; the runs under way end as they would."""
    todo: queue.SimpleQueue[tuple[int, str] | None] = queue.SimpleQueue()
    for item in enumerate(names):
        todo.put(item)
    for _ in range(MAX_RUN_THREADS):
        todo.put(None)
    parts: list[Outcome | None] = [None] * len(names)
    for index, part in _threads(todo, min(len(names), MAX_RUN_THREADS), full_reconcile, console_level):
        parts[index] = part
    return [part for part in parts if part is not None]


class _Todo(Protocol):
    def get(self) -> tuple[int, str] | None: ...


def _threads(todo: _Todo, count: int, full_reconcile: bool, console_level: str) -> list[tuple[int, Outcome]]:
    """`count` threads, each running the next workspace of `todo` (index, name) until it gives None."""
    parts: list[tuple[int, Outcome]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def work() -> None:
        try:
            found = resources()
            while not stop.is_set():
                item = todo.get()
                if item is None or stop.is_set():
                    return
                index, name = item
                parts.append((index, _run_workspace(name, full_reconcile, found, quiet=_quiet(console_level))))
        except BaseException as exc:  # re-raised in the calling thread, as a pool's map would
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=work, name=f"scanwatch-sync-{n}") for n in range(count)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        stop.set()
        for thread in threads:
            thread.join()
        raise
    if errors:
        raise errors[0]
    return parts


_TODO: Any = None  # in a run process of `_in_thread_processes`: the queue of workspaces all of them share


def _in_thread_processes(names: list[str], full_reconcile: bool, console_level: str,
                         processes: int) -> list[Outcome]:
    """`processes` processes running threads (`_threads`), all taking the next workspace from one queue, so
    none waits behind another's slow workspace; forked from a fork server that imported Dagster and the
    assets once. Each leads a session of its own, so Ctrl-C reaches this command alone; it then interrupts
    each process, whose runs under way end as they would."""
    with fork_server(["pipelines.commands.materialize"]) as context:
        todo = context.Queue()
        for item in enumerate(names):
            todo.put(item)
        for _ in range(processes * MAX_RUN_THREADS):
            todo.put(None)
        progress = _progress.isEnabledFor(logging.INFO) and bool(_progress.handlers)
        pids = context.SimpleQueue()
        parts: list[Outcome | None] = [None] * len(names)
        with ProcessPoolExecutor(max_workers=processes, mp_context=context, initializer=_pool_started,
                                 initargs=(todo, progress, pids)) as pool:
            futures = [pool.submit(_drain, full_reconcile, console_level) for _ in range(processes)]
            try:
                for future in futures:
                    for index, part in future.result():
                        parts[index] = part
            except KeyboardInterrupt:
                while not pids.empty():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pids.get(), signal.SIGINT)
                for future in futures:
                    with contextlib.suppress(BaseException):
                        future.result()
                raise
    return [part for part in parts if part is not None]


def _pool_started(todo: Any, progress: bool, pids: multiprocessing.queues.SimpleQueue[int]) -> None:
    global _TODO
    _TODO = todo
    _child_started(progress, pids)


def _drain(full_reconcile: bool, console_level: str) -> list[tuple[int, Outcome]]:
    return _threads(_TODO, MAX_RUN_THREADS, full_reconcile, console_level)


_progress = logging.getLogger("scanwatch.progress")


def show_progress() -> None:
    """The assets' progress lines (`scanwatch.progress`) on stderr, indented under the command's own lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("  %(message)s"))
    _progress.addHandler(handler)
    _progress.setLevel(logging.INFO)


def _in_processes(names: list[str], full_reconcile: bool, console_level: str) -> list[Outcome]:
    """A process per run: they overlap like the threads, and each records into the instance as a run launched
    by the daemon would. Each run process leads a session of its own, so Ctrl-C reaches this command alone
    (in the terminal's process group it also reached the helpers Dagster starts per step, which printed a
    traceback each); this command then interrupts every run, and waits for their outcomes."""
    _create_storage(names)
    # Never fork this process (it runs threads): a fork server, started clean, imports Dagster and the
    # assets once and forks each run from there, instead of every run importing them again.
    with fork_server(["pipelines.commands.materialize"]) as context:
        progress = _progress.isEnabledFor(logging.INFO) and bool(_progress.handlers)
        pids = context.SimpleQueue()
        with ProcessPoolExecutor(max_workers=min(len(names), MAX_RUN_PROCESSES), mp_context=context,
                                 initializer=_child_started, initargs=(progress, pids)) as pool:
            futures = [pool.submit(_materialize_workspace, name, full_reconcile, console_level) for name in names]
            try:
                return [future.result() for future in futures]
            except KeyboardInterrupt:
                while not pids.empty():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pids.get(), signal.SIGINT)
                return [future.result() for future in futures if not future.cancel()]


def _create_storage(names: list[str]) -> None:
    """Create the instance's SQLite storage here, once: runs starting in several processes on a new
    `DAGSTER_HOME` would each create its tables at once and fail ("table runs already exists")."""
    with dg.DagsterInstance.get() as instance:
        instance.get_runs(limit=1)
        _ = instance.event_log_storage, instance.schedule_storage
        register(instance, names)  # nor would they add the workspaces' partitions at once


def _child_started(progress: bool, pids: multiprocessing.queues.SimpleQueue[int]) -> None:
    os.setsid()
    pids.put(os.getpid())
    if progress:
        show_progress()


def _materialize_workspace(workspace: str, full_reconcile: bool, console_level: str) -> Outcome:
    """The workspace's Dagster run, recorded in `DAGSTER_HOME`'s instance."""
    with dg.DagsterInstance.get() as instance:
        return _materialize_in(instance, workspace, full_reconcile, console_level)


def _quiet(console_level: str) -> bool:
    """Whether Dagster's console logger at `console_level` would have left out the assets' warnings."""
    return bool(logging.getLevelName(console_level.upper()) > logging.WARNING)


def _run_workspace(workspace: str, full_reconcile: bool, found: Resources | None = None, *,
                   quiet: bool = False) -> Outcome:
    """The workspace's run without an instance to record it (`workspace_run`), told as a Dagster run's is."""
    run = run_workspace(workspace, full_reconcile, found, quiet=quiet)
    if not run.success:
        _after_failure(workspace)
    return Outcome(success=run.success, run_id=run.run_id, workspace=workspace, failed_step=run.failed_step,
                   error=run.error, failed_checks=run.failed_checks, warnings=run.warnings,
                   metadata={key: {k: _value(v) for k, v in meta.items()} for key, meta in run.metadata.items()})


def _after_failure(workspace: str) -> None:
    """The snapshot is skipped after a failed asset: the workspace's part shows the failure now."""
    from pipelines.core.settings import ConfigError, Settings
    from pipelines.sync.snapshot import refresh_after_failure

    settings = Settings.load()
    with contextlib.suppress(ConfigError):  # the run's own failure is what the user must see
        refresh_after_failure(settings.history, settings.workspace(workspace).label, found=settings,
                              workspace=workspace)


def _sync_job() -> dg.JobDefinition:
    """`sync_job` bound to the assets, checks and resources, as a deployment runs it: a CLI sync appears in
    Dagster's run list under that name (tagged `scanwatch/trigger=cli`), not as `__ephemeral_asset_job__`."""
    defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=history_checks, jobs=[sync_job],
                          resources=default_resources(), executor=dg.in_process_executor)
    return defs.resolve_job_def(sync_job.name)


def _materialize_in(instance: dg.DagsterInstance, workspace: str, full_reconcile: bool,
                    console_level: str) -> Outcome:
    register(instance, [workspace])
    run_config = {
        "ops": {"issues": {"config": {"full_reconcile": full_reconcile}},
                "scans": {"config": {"all_projects": full_reconcile}}},
        "loggers": {"console": {"config": {"log_level": console_level}}},
    }
    result = _sync_job().execute_in_process(
        run_config=run_config, instance=instance, raise_on_error=False, tags={"scanwatch/trigger": "cli"},
        partition_key=workspace,
    )
    outcome = Outcome(success=result.success, run_id=result.run_id, workspace=workspace)
    # Warnings only: Dagster's own ERROR lines ("Dependencies for step ... Not executing") repeat the failure.
    outcome.warnings = [entry.user_message for entry in instance.all_logs(result.run_id)
                        if entry.dagster_event is None and isinstance(entry.level, int)
                        and logging.WARNING <= entry.level < logging.ERROR]
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        outcome.metadata[mat.asset_key.to_user_string()] = {k: _value(v) for k, v in mat.metadata.items()}
    for event in result.get_step_failure_events():
        outcome.failed_step = event.step_key
        outcome.error = event.step_failure_data.error
        break
    if not result.success:
        _after_failure(workspace)
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION" and not event.asset_check_evaluation_data.passed:
            outcome.failed_checks.append(event.asset_check_evaluation_data.check_name)
    return outcome
