-- scanwatch history, schema version 21: the reconstruction's runs (migration 20) found by workspace, as
-- migration 15 found the tables they replace (a reconstruction replaces one workspace's runs; a reader asks
-- for one workspace's past).
-- PostgreSQL's alone (migration 015's reason). Only adds objects (IF NOT EXISTS): harmless twice.
CREATE INDEX IF NOT EXISTS reconstructed_score_runs_workspace ON reconstructed_score_runs (workspace_id);
CREATE INDEX IF NOT EXISTS reconstructed_open_issue_runs_workspace ON reconstructed_open_issue_runs (workspace_id);
