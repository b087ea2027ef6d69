-- The workspace's listed projects with their names and their listed targets' addresses: what the ownership
-- map's rules match (docs/ownership.md). One row per target (one with a NULL address for a project without).
SELECT p.id AS project_id, p.name, t.address
FROM projects AS p
LEFT JOIN targets AS t ON t.workspace_id = p.workspace_id AND t.project_id = p.id AND t.removed_at IS NULL
WHERE p.workspace_id = $workspace_id AND p.removed_at IS NULL
ORDER BY p.id, t.address;
