"""Run every asset once in-process, as the schedules would, and gather what the CLI reports.

One Dagster run per followed workspace (its partition), all at once: each key has its own rate-limit budget,
so K workspaces take about as long as the slowest one; their merges take DuckDB's writer in turn.
"""

from __future__ import annotations

import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import dagster as dg

from pipelines.assets import ALL_ASSETS
from pipelines.checks import history_checks
from pipelines.resources import default_resources


@dataclass
class Outcome:
    success: bool
    metadata: dict[str, dict] = field(default_factory=dict)
    failed_step: str | None = None
    error: object | None = None
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
    from pipelines.settings import Settings

    names = [workspace] if workspace else Settings.load().workspace_names
    if len(names) == 1 or os.environ.get("DAGSTER_HOME"):
        # One at a time in the main thread, where Ctrl-C lands in the run itself. With DAGSTER_HOME the runs
        # are recorded in its SQLite storage, and in-process runs sharing it from several threads were seen
        # to deadlock; the schedules' runs, separate processes, still read the workspaces at once.
        parts = [_materialize_workspace(name, full_reconcile, console_level) for name in names]
        return Outcome.combine(parts)
    # Dagster's compute-log capture swaps file descriptors 1 and 2 for each step and puts back what it
    # found; steps of concurrent runs interleave, so the last one may "restore" another's capture file.
    # The terminal's descriptors are put back here, whatever order the runs ended in.
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    try:
        with ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="scanwatch-sync") as pool:
            parts = list(pool.map(lambda name: _materialize_workspace(name, full_reconcile, console_level), names))
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
    return Outcome.combine(parts)


def _instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else dg.DagsterInstance.ephemeral()


def _materialize_workspace(workspace: str, full_reconcile: bool, console_level: str) -> Outcome:
    instance = _instance()
    run_config = {
        "ops": {"issues": {"config": {"full_reconcile": full_reconcile}},
                "scans": {"config": {"all_projects": full_reconcile}}},
        "loggers": {"console": {"config": {"log_level": console_level}}},
    }
    result = dg.materialize(
        [*ALL_ASSETS, *history_checks], resources=default_resources(), instance=instance,
        run_config=run_config, raise_on_error=False, tags={"scanwatch/trigger": "cli"}, partition_key=workspace,
    )
    outcome = Outcome(success=result.success, run_id=result.run_id, workspace=workspace)
    # Warnings only: Dagster's own ERROR lines ("Dependencies for step ... Not executing") repeat the failure.
    outcome.warnings = [entry.user_message for entry in instance.all_logs(result.run_id)
                        if entry.dagster_event is None and logging.WARNING <= entry.level < logging.ERROR]
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        outcome.metadata[mat.asset_key.to_user_string()] = {k: _value(v) for k, v in mat.metadata.items()}
    for event in result.get_step_failure_events():
        outcome.failed_step = event.step_key
        outcome.error = event.step_failure_data.error
        break
    if not result.success:
        _refresh_snapshot_after_failure()
    for event in result.all_events:
        data = getattr(event, "event_specific_data", None)
        if event.event_type_value == "ASSET_CHECK_EVALUATION" and not data.passed:
            outcome.failed_checks.append(data.check_name)
    return outcome


def _refresh_snapshot_after_failure() -> None:
    """Dagster skips the snapshot asset when an upstream asset fails; write it anyway, best effort, so
    the failure shows on /metrics now."""
    from pipelines import settings
    from pipelines.snapshot import refresh_snapshot
    from pipelines.storage import connect

    try:
        conn = connect(settings.Settings.load().history, wait_seconds=5)
    except Exception:  # the sync's own failure is what the user must see, not this one
        return
    try:
        refresh_snapshot(conn)
    except Exception:
        pass
    finally:
        conn.close()
