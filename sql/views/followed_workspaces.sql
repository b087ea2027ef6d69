-- The workspace each followed name answers for now: its newest account row (a name bound again to another
-- workspace answers for the newer one). `label` is NULL for the one workspace of SCANWATCH_BASE_URL +
-- SCANWATCH_API_KEY. A step finds its workspace here (sync/current_workspace.sql); the scan sensor, every
-- followed workspace at once (sync/pending_by_workspace.sql).
CREATE VIEW followed_workspaces AS
SELECT label, workspace_id
FROM (
    SELECT workspace_label AS label, workspace_id,
           row_number() OVER (PARTITION BY workspace_label ORDER BY last_observed_at DESC, workspace_id) AS newest
    FROM accounts
) AS a
WHERE newest = 1;
