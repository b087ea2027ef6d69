-- The workspace's listed projects with their names and their listed targets' addresses: what the ownership
-- map's rules match (docs/ownership.md). One row per target (one with a NULL address for a project without).
SELECT l.project_id, p.name, t.address
FROM project_labels AS l
JOIN projects AS p ON p.workspace_id = l.workspace_id AND p.id = l.project_id
LEFT JOIN target_states AS t ON t.workspace_id = l.workspace_id AND t.project_id = l.project_id AND t.listed
WHERE l.workspace_id = $workspace_id AND l.listed
ORDER BY l.project_id, t.address;
