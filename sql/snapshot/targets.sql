-- Current targets with the coverage and outcome of their latest finished scan.
WITH last_scan AS (
    SELECT target_id, status, coverage, kind
    FROM scans
    WHERE status IN (SELECT status FROM scan_statuses WHERE finished)
    QUALIFY row_number() OVER (
        PARTITION BY target_id ORDER BY coalesce(finished_at, created_at) DESC, id DESC) = 1
),
last_done AS (
    SELECT target_id, coverage
    FROM scans
    WHERE status = 'done' AND coverage IS NOT NULL
    QUALIFY row_number() OVER (
        PARTITION BY target_id ORDER BY coalesce(finished_at, created_at) DESC, id DESC) = 1
)
SELECT
    t.workspace_id,
    t.project_id,
    coalesce(p.name, p.id) AS project,
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
FROM targets t
JOIN projects p ON p.id = t.project_id AND p.removed_at IS NULL
LEFT JOIN last_done d ON d.target_id = t.id
LEFT JOIN last_scan ls ON ls.target_id = t.id
WHERE t.removed_at IS NULL
ORDER BY t.workspace_id, t.project_id, t.id
