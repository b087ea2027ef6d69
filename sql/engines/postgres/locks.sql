-- The turns of a PostgreSQL history's writers: one row per workspace, which a merge transaction locks
-- (engines/postgres/workspace_lock.sql) so that two syncs of one workspace merge in turn. A row lock rather than an
-- advisory lock, because the server keeps it from readers: `SELECT ... FOR UPDATE` needs the UPDATE
-- privilege and a read-write transaction, which no reader role and no read door has, where any role may
-- take any advisory lock and hold a workspace's syncs for as long as it likes. Installed with the
-- compatibility layer (pipelines/storage/engines/postgres_engine.py); not history, so no DuckDB twin.
CREATE TABLE IF NOT EXISTS scanwatch_workspace_locks (
    workspace_key VARCHAR PRIMARY KEY  -- the service's workspace id, '' before it is known
);
