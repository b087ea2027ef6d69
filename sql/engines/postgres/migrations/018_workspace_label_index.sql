-- scanwatch history, schema version 18: `accounts` found by the name a workspace is followed under. A
-- workspace's run looks its workspace up by that name (sync/current_workspace.sql, sync/workspace_binding.sql)
-- and the `workspace_runs` view resolves a run recorded before its workspace was known by it; without an index
-- each of those read every workspace's account (`python -m benchmarks.pg_workspace_reads`,
-- docs/benchmarks.md "Reads of one workspace").
-- PostgreSQL's alone (migration 015's reason). Only adds objects (IF NOT EXISTS): harmless twice.
CREATE INDEX IF NOT EXISTS accounts_workspace_label ON accounts (workspace_label);
