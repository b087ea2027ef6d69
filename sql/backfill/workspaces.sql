-- Workspaces scanwatch has observed, and whether they were ever reconstructed.
SELECT
    f.workspace_id,
    EXISTS (SELECT 1 FROM reconstruction_runs AS r WHERE r.workspace_id = f.workspace_id) AS reconstructed
FROM first_observations AS f
ORDER BY f.workspace_id
