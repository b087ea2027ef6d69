-- Workspaces scanwatch has observed, and whether they were ever reconstructed: every one, or only
-- $workspace_id's (a workspace's run reconstructs its own past, and reads no other workspace's rows).
SELECT
    f.workspace_id,
    EXISTS (SELECT 1 FROM reconstruction_runs AS r WHERE r.workspace_id = f.workspace_id) AS reconstructed
FROM first_observations AS f
WHERE $workspace_id IS NULL OR f.workspace_id = $workspace_id
ORDER BY f.workspace_id
