"""Schedules. Cadences come from the settings so a deployment can tune them without code; each tick asks
for one run per workspace the file lists at that tick (read again at each one, through the service
resource), so one workspace's failure never holds the others back and a workspace added to the file is
refreshed from the next tick on. With `SCANWATCH_REFRESH_BATCH=K` a tick asks for one run per K workspaces
instead, each refreshing its workspaces as runs of their own (`batches.py`)."""

from __future__ import annotations

import dagster as dg

from pipelines.core.settings import Settings
from pipelines.defs.batches import batch_job, batched
from pipelines.defs.jobs import refresh_job, scans_job
from pipelines.defs.partitions import followed_workspaces
from pipelines.defs.resources import ScanningServiceResource
from pipelines.defs.scheduled_scans import scheduled_scans_schedule


def every_workspace(name: str, job: dg.UnresolvedAssetJobDefinition, cron: str, description: str,
                    batch: int = 1) -> dg.ScheduleDefinition:
    # A run per workspace targets the job itself, as it always has; batches target `batch_job`.
    @dg.schedule(name=name, job=batch_job if batch > 1 else job, cron_schedule=cron,
                 default_status=dg.DefaultScheduleStatus.RUNNING, description=description)
    def _schedule(context: dg.ScheduleEvaluationContext,
                  scanning_service: ScanningServiceResource) -> list[dg.RunRequest]:
        tick = context.scheduled_execution_time.strftime("%Y%m%dT%H%M")
        names = followed_workspaces(context.instance, scanning_service.workspace_names())
        if batch <= 1:
            return [dg.RunRequest(run_key=f"{workspace}-{tick}", partition_key=workspace) for workspace in names]
        return [dg.RunRequest(run_key=f"{job.name}-{group[0]}-{len(group)}-{tick}",
                              tags={"scanwatch/workspaces": f"{group[0]}..{group[-1]} ({len(group)})"},
                              run_config={"ops": {"refresh_batch": {"config": {
                                  "workspaces": group, "job_name": job.name, "tick": tick}}}})
                for group in batched(names, batch)]

    return _schedule


@dg.definitions
def schedules() -> dg.Definitions:
    """A cadence is part of a schedule's definition, which Dagster reads when the code location loads: the
    one place outside the resources where the Dagster definitions read the settings."""
    settings = Settings.load()
    return dg.Definitions(schedules=[
        every_workspace(
            "refresh_schedule", refresh_job, settings.refresh_cron,
            "Account, projects and issues of every workspace (SCANWATCH_REFRESH_CRON, every 15 minutes by "
            "default); a full reconcile of each project every 6 hours.", settings.refresh_batch),
        every_workspace(
            "scans_schedule", scans_job, settings.scans_cron,
            "Scan history of the projects that moved, in every workspace (SCANWATCH_SCANS_CRON, hourly by "
            "default).", settings.refresh_batch),
        scheduled_scans_schedule(settings.scan_cron),
    ])
