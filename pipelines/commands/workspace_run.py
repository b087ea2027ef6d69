"""A workspace's run of `scanwatch sync` when no Dagster instance keeps it (no `DAGSTER_HOME`).

The run is `sync_job`'s, step for step: the assets' own work (`refresh_*` of `pipelines/defs/assets`), in the
job's order, with the assets' config defaults, each step recorded in `sync_runs` under the run's id; a step
whose upstream failed is skipped, as Dagster skips it, and the history checks run once both tables they
check are written. What is left out is what only an instance would have kept: Dagster's ephemeral instance
stored each run's 55 events, looked up upstream data versions in them and was thrown away with them. That
bookkeeping held the interpreter's lock for most of an unchanged workspace's Python, and on a DuckDB history,
whose writers are threads of one process, the merges of every other workspace waited for that lock
(`python -m benchmarks.refresh_ab`, docs/benchmarks.md). With `DAGSTER_HOME` each workspace is a Dagster
run of its own, recorded in the instance, as before.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from pipelines.api import ScanningClient
from pipelines.api.stats import RequestStats
from pipelines.core.settings import Settings
from pipelines.defs.assets.account import refresh_account
from pipelines.defs.assets.issues import IssuesConfig, refresh_issues
from pipelines.defs.assets.metrics import SnapshotConfig, refresh_metrics
from pipelines.defs.assets.projects import refresh_projects
from pipelines.defs.assets.scans import ScansConfig, refresh_scans
from pipelines.defs.assets.step import OpenStep, open_step
from pipelines.defs.checks import CHECKS, count_breaks
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.storage.destinations.impl import engine_for

_log = logging.getLogger("scanwatch.sync")
T = TypeVar("T")


@dataclass(frozen=True)
class StepError:
    """A failed step's exception as Dagster's error chain reports one (`materialize.ErrorChain`): its
    message with the class's path in front, and the exception it was raised from."""

    message: str
    cls_name: str | None
    cause: StepError | None = None

    @classmethod
    def of(cls, exc: BaseException) -> StepError:
        return cls("".join(traceback.TracebackException.from_exception(exc).format_exception_only()),
                   type(exc).__name__, cls.of(exc.__cause__) if exc.__cause__ is not None else None)


@dataclass
class _RunLog:
    """The steps' log: each warning is kept for the command's summary, as it read them from Dagster's run
    log, and shown on stderr as Dagster's console logger showed it, unless `quiet` (the CLI prints them
    itself)."""

    quiet: bool = False
    warnings: list[str] = field(default_factory=list)

    def info(self, msg: str, *args: Any) -> None:
        _log.debug(msg, *args)

    def warning(self, msg: str, *args: Any) -> None:
        self.warnings.append(msg % args if args else msg)
        if not self.quiet:  # on stderr, whatever the process's own logging does with its records
            print(self.warnings[-1], file=sys.stderr)


@dataclass
class WorkspaceRun:
    """What a run tells the command: `materialize.Outcome`'s fields, filled the way Dagster's run fills them."""

    success: bool = True
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed_step: str | None = None
    error: StepError | None = None
    failed_checks: list[str] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Resources:
    """The two resources every step is given, and the command's deadline for a run, made once per run thread."""

    history: HistoryResource
    service: ScanningServiceResource
    deadline_seconds: float


@dataclass(frozen=True)
class _Step:
    key: str  # Dagster's step key, which a failure line names
    needs: tuple[str, ...]  # the step keys it waits for
    name: str  # its name in `sync_runs`
    work: Callable[[OpenStep, Resources, bool], dict[str, dict[str, Any]]]  # (step, resources, full reconcile)
    reads_service: bool = True


# sync_job's steps in the order its in-process executor runs them (`tests/workspaces/test_workspace_run.py`
# compares a sync of each kind). The checks run once both tables they check are written.
STEPS = (
    _Step("account", (), "account", lambda step, r, full: refresh_account(step)),
    _Step("projects_and_targets", ("account",), "projects", lambda step, r, full: refresh_projects(step)),
    _Step("issues", ("projects_and_targets",), "issues",
          lambda step, r, full: refresh_issues(step, IssuesConfig(full_reconcile=full))),
    _Step("scans", ("projects_and_targets",), "scans",
          lambda step, r, full: refresh_scans(step, ScansConfig(all_projects=full), r.service)),
    _Step("metrics_snapshot", ("account", "projects_and_targets", "scans", "issues"), "metrics_snapshot",
          lambda step, r, full: refresh_metrics(step, SnapshotConfig(), r.history), reads_service=False),
)
CHECKS_STEP, CHECKED = "history_checks", ("scans", "issues")


def resources() -> Resources:
    """The resources a Dagster run would be given (`default_resources`), their values read here: Dagster's
    run storage is given variable names, and nothing here stores them."""
    settings = Settings.load()
    file = str(settings.workspaces_file) if settings.workspaces_file is not None else ""
    # Without a file, the resource reads SCANWATCH_BASE_URL and SCANWATCH_API_KEY at each step, as Dagster's
    # run reads the variables it names.
    return Resources(HistoryResource(database=settings.history.value), ScanningServiceResource(workspaces_file=file),
                     settings.sync_deadline_seconds)


def run_workspace(workspace: str, full_reconcile: bool, found: Resources | None = None, *,
                  quiet: bool = False) -> WorkspaceRun:
    """`workspace`'s run of every step. A failed step ends its own branch only: the steps that need it are
    skipped, the others run, as in Dagster's run of the job. `quiet`: warnings kept, not shown."""
    res = found or resources()
    run = WorkspaceRun()
    log = _RunLog(quiet)
    deadline = time.time() + res.deadline_seconds
    done: set[str] = set()
    with engine_for(res.history.location).keeping_writers(), \
            _RunClient(res.service, workspace, deadline) as client:  # as the resource holds it for a run
        for spec in STEPS:
            if not all(need in done for need in spec.needs):
                continue
            step = partial(open_step, spec.name, res.history, res.service, workspace, run_id=run.run_id, log=log,
                           deadline=deadline, reads_service=spec.reads_service, client=client)
            if _ran(run, spec.key, partial(spec.work, step, res, full_reconcile), run.metadata.update):
                done.add(spec.key)
            if all(key in done for key in CHECKED) and CHECKS_STEP not in done:
                done.add(CHECKS_STEP)
                _ran(run, CHECKS_STEP, partial(count_breaks, res.history, res.service, workspace, CHECKS),
                     lambda counts: run.failed_checks.extend(name for name, bad in counts.items() if bad))
    run.warnings = log.warnings
    return run


@dataclass
class _RunClient:
    """The workspace's one client for the run's steps, opened by the first step that reads the service and
    closed with the run; each step counts its own requests (`sync_runs`). A client per step (as a Dagster
    run's steps, each possibly a process of its own, have) cost an unchanged workspace four HTTP clients,
    each reading the environment for proxies: the size of the environment (a key variable per workspace)
    times four, under the interpreter's lock (docs/benchmarks.md)."""

    service: ScanningServiceResource
    workspace: str
    deadline: float
    _kept: ExitStack = field(default_factory=ExitStack)
    _client: ScanningClient | None = None

    def __enter__(self) -> _RunClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._kept.close()

    @contextmanager
    def __call__(self) -> Iterator[ScanningClient]:
        if self._client is None:
            self._client = self._kept.enter_context(self.service.client(self.workspace, sync_deadline=self.deadline))
        self._client.stats = RequestStats()
        yield self._client


def _ran(run: WorkspaceRun, key: str, work: Callable[[], T], told: Callable[[T], object]) -> bool:
    """Whether the step `key` succeeded (its result then `told`); the run's first failure is the one it
    reports, as Dagster's does."""
    try:
        result = work()
    except Exception as exc:
        if run.success:
            run.success, run.failed_step, run.error = False, key, StepError.of(exc)
        return False
    told(result)
    return True
