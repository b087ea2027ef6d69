-- The turn of one workspace's merges, until this transaction ends (engines/postgres/locks.sql says why a
-- row). Two statements: the second takes a fresh snapshot, so it finds the row a concurrent first merge of
-- the workspace inserted, once that merge has committed and the insert here has stopped waiting for it.
INSERT INTO scanwatch_workspace_locks (workspace_key) VALUES ($key) ON CONFLICT (workspace_key) DO NOTHING;
SELECT workspace_key FROM scanwatch_workspace_locks WHERE workspace_key = $key FOR UPDATE;
