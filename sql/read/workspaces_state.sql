-- Every name the history has followed a workspace under ($default_workspace, from
-- pipelines/core/credentials.py: the one workspace of the two variables), with the service's workspace it is bound to and its last sync: what `scanwatch workspaces`
-- shows beside the workspaces file, so a removed workspace still shows, with its history kept.
WITH names AS (
    SELECT workspace_label AS label FROM accounts
    UNION
    SELECT workspace_label FROM sync_runs
)
SELECT coalesce(n.label, $default_workspace) AS name,
       (SELECT a.workspace_id FROM accounts a WHERE a.workspace_label IS NOT DISTINCT FROM n.label
        ORDER BY a.last_observed_at DESC LIMIT 1) AS workspace_id,
       (SELECT a.workspace_name FROM accounts a WHERE a.workspace_label IS NOT DISTINCT FROM n.label
        ORDER BY a.last_observed_at DESC LIMIT 1) AS workspace_name,
       (SELECT max(r.finished_at) FROM sync_runs r
        WHERE r.workspace_label IS NOT DISTINCT FROM n.label AND r.status = 'success') AS last_success,
       (SELECT r.status FROM sync_runs r WHERE r.workspace_label IS NOT DISTINCT FROM n.label
        ORDER BY r.started_at DESC LIMIT 1) AS last_status
FROM names n
ORDER BY name;
