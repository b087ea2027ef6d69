"""Ingestion assets by domain; `ALL_ASSETS` is what `scanwatch sync` and the Definitions load."""

from pipelines.defs.assets.account import account
from pipelines.defs.assets.issues import issues
from pipelines.defs.assets.metrics import metrics_snapshot
from pipelines.defs.assets.projects import projects_and_targets
from pipelines.defs.assets.scans import scans

ALL_ASSETS = [account, projects_and_targets, scans, issues, metrics_snapshot]

__all__ = ["ALL_ASSETS", "account", "issues", "metrics_snapshot", "projects_and_targets", "scans"]
