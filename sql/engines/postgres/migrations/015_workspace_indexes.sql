-- scanwatch history, schema version 15: an index on `workspace_id` for each table a workspace's sync, checks and
-- snapshot part read by workspace. A PostgreSQL history holds many workspaces (one database for every pod), and
-- without them each of those reads scanned every workspace's rows: with 50 medium workspaces in one database
-- (251k issues), an unchanged re-sync of one took 8.5 to 10.0 s, against 4.9 to 6.2 s with the indexes, as
-- fast as its first sync in a database of its own (`python -m benchmarks.pg_shared`, docs/benchmarks.md).
-- PostgreSQL's alone: a DuckDB file answers a workspace's reads from its zone maps, and an ART index would hold
-- the history's rows in scanwatch's memory (migration 011).
-- Only adds objects (IF NOT EXISTS): harmless twice.
CREATE INDEX IF NOT EXISTS issues_workspace ON issues (workspace_id);
CREATE INDEX IF NOT EXISTS issue_events_workspace ON issue_events (workspace_id);
CREATE INDEX IF NOT EXISTS scans_workspace ON scans (workspace_id);
CREATE INDEX IF NOT EXISTS targets_workspace ON targets (workspace_id);
CREATE INDEX IF NOT EXISTS projects_workspace ON projects (workspace_id);
CREATE INDEX IF NOT EXISTS score_snapshots_workspace ON score_snapshots (workspace_id);
CREATE INDEX IF NOT EXISTS project_sync_state_workspace ON project_sync_state (workspace_id);
CREATE INDEX IF NOT EXISTS scans_gone_workspace ON scans_gone (workspace_id);
CREATE INDEX IF NOT EXISTS sync_runs_workspace ON sync_runs (workspace_id);
CREATE INDEX IF NOT EXISTS ingest_warnings_workspace ON ingest_warnings (workspace_id);
CREATE INDEX IF NOT EXISTS scan_request_skips_workspace ON scan_request_skips (workspace_id);
CREATE INDEX IF NOT EXISTS reconstructed_scores_workspace ON reconstructed_scores (workspace_id);
CREATE INDEX IF NOT EXISTS reconstructed_open_issues_workspace ON reconstructed_open_issues (workspace_id);
CREATE INDEX IF NOT EXISTS reconstruction_runs_workspace ON reconstruction_runs (workspace_id);
