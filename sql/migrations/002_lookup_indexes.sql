-- scanwatch history, schema version 2: indexes for the lookups every sync, dashboard and cookbook query
-- makes as the history grows (events since a time, a project's open issues, a project's scans by date,
-- a project's score over time, the last run of an asset). Only adds indexes, each IF NOT EXISTS, so it is
-- safe on any existing history and changes no row; the migration runs in one transaction.
CREATE INDEX IF NOT EXISTS issue_events_observed_at ON issue_events (observed_at);
CREATE INDEX IF NOT EXISTS issues_project_status ON issues (project_id, status);
CREATE INDEX IF NOT EXISTS scans_project_created_at ON scans (project_id, created_at);
CREATE INDEX IF NOT EXISTS score_snapshots_project_observed_at ON score_snapshots (project_id, observed_at);
CREATE INDEX IF NOT EXISTS sync_runs_asset_started_at ON sync_runs (asset, started_at);
