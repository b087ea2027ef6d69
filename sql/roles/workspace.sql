-- One workspace's reader role: the rows of its workspace and no other's, kept by the server's row-level
-- security (the policies of workspace_table.sql), whatever the role types. It reads the tables; the views
-- layer reads its tables with its owner's rights, so it is not granted: `scanwatch sql --workspace NAME`
-- makes temporary copies of the views that read with this role's rights, under its policies.
DO $$ BEGIN CREATE ROLE {role} LOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
DO $$ BEGIN EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO {role}', current_database()); END $$;
GRANT USAGE ON SCHEMA {schema} TO {role};
{limits}
