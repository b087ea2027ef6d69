-- Current projects (those the service still lists).
SELECT
    p.workspace_id,
    p.id AS project_id,
    coalesce(p.name, p.id) AS project,
    p.score,
    p.grade,
    p.open_issues,
    p.paused,
    epoch(p.last_scan_at) AS last_scan_at
FROM projects p
WHERE p.removed_at IS NULL
ORDER BY p.workspace_id, p.id
