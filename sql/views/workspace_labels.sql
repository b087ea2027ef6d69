-- What a workspace is called on every metric, alert, backfilled series and cookbook row: the name the
-- workspaces file follows it under (`accounts.workspace_label`, bound at its first sync), else the service's
-- own workspace name (the one workspace of SCANWATCH_BASE_URL + SCANWATCH_API_KEY keeps it), else its id.
CREATE VIEW workspace_labels AS
SELECT
    a.workspace_id,
    coalesce(a.workspace_label, a.workspace_name, a.workspace_id) AS workspace
FROM accounts AS a;
