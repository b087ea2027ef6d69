"""Freshness declared on the assets, as Dagster 1.13 evaluates it (its freshness daemon, the asset health in
the UI): the same hour the `SecscanSyncStale` alert allows a workspace's sync, with a warning once two
15-minute refreshes have been missed; the scans, refreshed hourly, get twice that.

Dagster judges an asset's freshness from its newest materialization of any partition, so with several
workspaces these say that the refresh runs at all; a single workspace left behind is the alert's to tell
(`secscan_sync_last_success_timestamp_seconds` per workspace).
"""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

REFRESHED = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=1), warn_window=timedelta(minutes=30))
REFRESHED_HOURLY = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=2),
                                                  warn_window=timedelta(minutes=75))
