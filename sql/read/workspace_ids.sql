-- The service's workspace id of a followed name: the name given in SCANWATCH_WORKSPACES_FILE, or
-- $default_workspace (pipelines/core/credentials.py's) for the one workspace of the two variables; the service's own workspace name or id are accepted too.
SELECT workspace_id
FROM accounts
WHERE workspace_label = $name
   OR (workspace_label IS NULL AND $name = $default_workspace)
   OR workspace_id = $name
   OR lower(workspace_name) = lower($name)
ORDER BY workspace_label = $name DESC
LIMIT 1;
