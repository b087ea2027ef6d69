"""Schedules. Cadences come from the settings so a deployment can tune them without code; each tick asks
for one run per workspace the file lists at that tick (read again at each one, through the service
resource), so one workspace's failure never holds the others back and a workspace added to the file is
refreshed from the next tick on."""

from __future__ import annotations

import dagster as dg

from pipelines.core.settings import Settings
from pipelines.defs.jobs import refresh_job, scans_job
from pipelines.defs.partitions import followed_workspaces
from pipelines.defs.resources import ScanningServiceResource
from pipelines.defs.scheduled_scans import scheduled_scans_schedule


def every_workspace(name: str, job: dg.UnresolvedAssetJobDefinition, cron: str,
                    description: str) -> dg.ScheduleDefinition:
    @dg.schedule(name=name, job=job, cron_schedule=cron, default_status=dg.DefaultScheduleStatus.RUNNING,
                 description=description)
    def _schedule(context: dg.ScheduleEvaluationContext,
                  scanning_service: ScanningServiceResource) -> list[dg.RunRequest]:
        tick = context.scheduled_execution_time.strftime("%Y%m%dT%H%M")
        return [dg.RunRequest(run_key=f"{workspace}-{tick}", partition_key=workspace)
                for workspace in followed_workspaces(context.instance, scanning_service.workspace_names())]

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
            "default); a full reconcile of each project every 6 hours."),
        every_workspace(
            "scans_schedule", scans_job, settings.scans_cron,
            "Scan history of the projects that moved, in every workspace (SCANWATCH_SCANS_CRON, hourly by "
            "default)."),
        scheduled_scans_schedule(settings.scan_cron),
    ])
