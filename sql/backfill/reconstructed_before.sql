-- Whether the workspace was reconstructed before (its first reconstruction is recorded even when empty).
SELECT EXISTS (SELECT 1 FROM reconstruction_runs WHERE workspace_id = $workspace_id)
