"""The scanwatch code location: one Definitions assembling assets, checks, jobs, schedules and sensors.

Every job runs in-process: its steps (assets, checks, the snapshot) execute one after another in the run's
own process. The multiprocess default starts a Python process per step, each importing Dagster and
scanwatch again (about 5 s apiece on a busy host), for steps that take milliseconds and, behind the `duckdb`
pool, could never run side by side anyway. In-process runs still claim the pool's slot step by step, so
runs never write DuckDB at once; on Kubernetes a run is one pod rather than one per step. Checks stay
separate asset checks rather than check specs inside the assets: the in-process executor makes their
steps cost milliseconds, and a check that fails to run then never fails its asset's materialization.
"""

import dagster as dg

from pipelines.defs.assets import ALL_ASSETS
from pipelines.defs.checks import history_checks
from pipelines.defs.jobs import project_refresh_job, refresh_job, scans_job, sync_job
from pipelines.defs.resources import default_resources
from pipelines.defs.scheduled_scans import scheduled_scans_job, scheduled_scans_schedule
from pipelines.defs.schedules import refresh_schedule, scans_schedule
from pipelines.defs.sensors import scan_finished_sensor, snapshot_after_failure, workspaces_sensor

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=history_checks,
    jobs=[sync_job, refresh_job, scans_job, project_refresh_job, scheduled_scans_job],
    schedules=[refresh_schedule, scans_schedule, scheduled_scans_schedule],
    sensors=[workspaces_sensor, scan_finished_sensor, snapshot_after_failure],
    resources=default_resources(),
    executor=dg.in_process_executor,
)
