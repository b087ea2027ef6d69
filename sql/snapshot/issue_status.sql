-- Project x status x severity grid of issues in their current status (unknown statuses included).
WITH statuses AS (
    SELECT status FROM issue_statuses
    UNION SELECT DISTINCT status FROM issues WHERE status IS NOT NULL
),
sevs AS (
    SELECT severity FROM severities
    UNION SELECT DISTINCT severity FROM issues WHERE severity IS NOT NULL
),
counts AS (
    -- Issues the service no longer shows count in secscan_issues_not_visible, not here.
    SELECT project_id, status, severity, count(*) AS n FROM issues WHERE hidden_reason IS NULL GROUP BY ALL
)
SELECT p.workspace_id, p.id AS project_id, coalesce(p.name, p.id) AS project, s.status, v.severity,
       coalesce(c.n, 0) AS issues
FROM projects p
CROSS JOIN statuses s
CROSS JOIN sevs v
LEFT JOIN counts c ON c.project_id = p.id AND c.status = s.status AND c.severity = v.severity
WHERE p.removed_at IS NULL
ORDER BY p.workspace_id, p.id, s.status, v.severity
