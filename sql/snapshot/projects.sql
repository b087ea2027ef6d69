-- The part's current projects (those the service still lists).
SELECT
    p.workspace_id,
    l.team,
    p.id AS project_id,
    l.project,
    p.score,
    p.grade,
    p.open_issues,
    p.paused,
    epoch(p.last_scan_at) AS last_scan_at
FROM projects AS p
JOIN project_labels AS l ON l.project_id = p.id AND l.listed
WHERE p.workspace_id = $workspace_id
ORDER BY p.id;
