-- Several workspaces in one deployment (SCANWATCH_WORKSPACES_FILE). Each followed workspace has a name
-- given by the user; the history binds that name to the service's workspace id on the first sync, so a key
-- later pointed at another workspace is refused instead of mixing two workspaces' rows under one name.
-- NULL for the one workspace of SCANWATCH_BASE_URL + SCANWATCH_API_KEY (its metrics keep the service's name).
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS workspace_label VARCHAR;
-- A run that failed before the workspace's id was known (a refused key on the very first sync) still says
-- which followed workspace it was for, so its failure shows on that workspace's health.
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS workspace_label VARCHAR;
