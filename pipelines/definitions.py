"""The scanwatch code location: one Definitions assembling assets, checks, jobs, schedules and sensors."""

import dagster as dg

from pipelines.assets import ALL_ASSETS
from pipelines.checks import history_checks
from pipelines.jobs import project_refresh_job, refresh_job, scans_job, sync_job
from pipelines.resources import default_resources
from pipelines.scheduled_scans import scheduled_scans_job, scheduled_scans_schedule
from pipelines.schedules import refresh_schedule, scans_schedule
from pipelines.sensors import scan_finished_sensor, snapshot_after_failure

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=history_checks,
    jobs=[sync_job, refresh_job, scans_job, project_refresh_job, scheduled_scans_job],
    schedules=[refresh_schedule, scans_schedule, scheduled_scans_schedule],
    sensors=[scan_finished_sensor, snapshot_after_failure],
    resources=default_resources(),
)
