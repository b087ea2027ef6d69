"""Followed workspaces as Dagster partitions.

Each workspace is a static partition of the ingestion assets: the asset graph, the partition status bar
and the run list then show each workspace's freshness and failures on its own, a backfill or a re-run
can target one workspace, and a failure in one marks only its partition. The names come from
`SCANWATCH_WORKSPACES_FILE` (or the single `default` workspace of the two variables).
"""

import dagster as dg

from pipelines.settings import Settings

WORKSPACES = dg.StaticPartitionsDefinition(Settings.load().workspace_names)
