"""Schedules. Cadences come from the environment so a deployment can tune them without code."""

from __future__ import annotations

import dagster as dg

from pipelines.jobs import refresh_job, scans_job
from pipelines.settings import Settings

_settings = Settings.load()

refresh_schedule = dg.ScheduleDefinition(
    name="refresh_schedule",
    job=refresh_job,
    cron_schedule=_settings.refresh_cron,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Account, projects and issues (SCANWATCH_REFRESH_CRON, every 15 minutes by default); "
    "a full reconcile of each project every 6 hours.",
)
scans_schedule = dg.ScheduleDefinition(
    name="scans_schedule",
    job=scans_job,
    cron_schedule=_settings.scans_cron,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Scan history of the projects that moved (SCANWATCH_SCANS_CRON, hourly by default).",
)
