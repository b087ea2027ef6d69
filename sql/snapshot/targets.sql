-- The part's current targets with the coverage and outcome of their latest finished scan.
WITH finished AS (
    SELECT target_id, status, coverage,
           row_number() OVER (PARTITION BY target_id ORDER BY coalesce(finished_at, created_at) DESC, id DESC) AS n
    FROM scans
    WHERE workspace_id = $workspace_id AND status IN (SELECT status FROM scan_statuses WHERE finished)
),
done AS (
    SELECT target_id, coverage,
           row_number() OVER (PARTITION BY target_id ORDER BY coalesce(finished_at, created_at) DESC, id DESC) AS n
    FROM scans
    WHERE workspace_id = $workspace_id AND status = 'done' AND coverage IS NOT NULL
)
SELECT
    t.workspace_id,
    l.team,
    t.project_id,
    l.project,
    t.id AS target_id,
    t.address,
    t.kind,
    t.verified,
    t.score,
    t.grade,
    t.hidden_issues,
    epoch(t.last_scan_at) AS last_scan_at,
    d.coverage,
    CASE ls.status WHEN 'failed' THEN 1 WHEN 'done' THEN 0 END AS last_scan_failed
FROM target_states AS t
JOIN project_labels AS l ON l.workspace_id = t.workspace_id AND l.project_id = t.project_id AND l.listed
LEFT JOIN done AS d ON d.target_id = t.id AND d.n = 1
LEFT JOIN finished AS ls ON ls.target_id = t.id AND ls.n = 1
WHERE t.workspace_id = $workspace_id AND t.listed
ORDER BY t.project_id, t.id;
