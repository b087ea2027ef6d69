-- scanwatch history, schema version 17: the workspace index of `project_owners` (migration 015's reason: a
-- PostgreSQL history holds many workspaces, and a workspace's snapshot reads its own rows only).
-- Only adds objects (IF NOT EXISTS): harmless twice.
CREATE INDEX IF NOT EXISTS project_owners_workspace ON project_owners (workspace_id, project_id);
