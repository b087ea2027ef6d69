"""Asset jobs: what each schedule or sensor refreshes."""

from __future__ import annotations

import dagster as dg

_PROJECTS = dg.AssetSelection.assets("projects", "targets")
_SNAPSHOT = dg.AssetSelection.assets("metrics_snapshot")

sync_job = dg.define_asset_job(
    "sync_job", selection=dg.AssetSelection.groups("service", "exporter"),
    description="Everything: account, projects, targets, scans, issues and the metrics snapshot.",
)
refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.assets("account", "issues") | _PROJECTS | _SNAPSHOT,
    description="Account, projects and issues of the projects that moved (the frequent refresh).",
)
scans_job = dg.define_asset_job(
    "scans_job", selection=dg.AssetSelection.assets("scans") | _PROJECTS | _SNAPSHOT,
    description="Scan history of the projects that moved (hourly by default).",
)
project_refresh_job = dg.define_asset_job(
    "project_refresh_job",
    selection=dg.AssetSelection.assets("scans", "issues") | _PROJECTS | _SNAPSHOT,
    description="Scores, scans and issues of named projects, run by the scan-finished sensor.",
)
