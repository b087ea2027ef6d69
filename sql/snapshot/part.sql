-- The label of one part of the snapshot: its workspace's (`workspace_labels`); a workspace never read yet is
-- known by its followed name alone ($label).
SELECT coalesce((SELECT workspace FROM workspace_labels WHERE workspace_id = $workspace_id), $label) AS workspace;
