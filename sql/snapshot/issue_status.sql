-- Project x status x severity grid of the part's issues in their current status (unknown statuses included).
-- Only the issues the service still shows (`visible_issues`): the others count in secscan_issues_not_visible.
WITH visible AS (
    SELECT project_id, status, severity
    FROM visible_issues
    WHERE workspace_id = $workspace_id
),
statuses AS (
    SELECT status FROM issue_statuses
    UNION SELECT DISTINCT status FROM visible WHERE status IS NOT NULL
),
sevs AS (
    SELECT severity FROM severity_grid WHERE workspace_id = $workspace_id
),
counts AS (
    SELECT project_id, status, severity, count(*) AS n FROM visible GROUP BY project_id, status, severity
)
SELECT l.workspace_id, l.team, l.project_id, l.project, s.status, v.severity, coalesce(c.n, 0) AS issues
FROM project_labels AS l
CROSS JOIN statuses AS s
CROSS JOIN sevs AS v
LEFT JOIN counts AS c ON c.project_id = l.project_id AND c.status = s.status AND c.severity = v.severity
WHERE l.workspace_id = $workspace_id AND l.listed
ORDER BY l.project_id, s.status, v.severity;
