-- Project x severity lifecycle counters from issue_events (severity as it was at the event).
-- Every cell of the grid is present, zeros included, so increase() sees the first event of a project.
-- "fixed" accepts both an explicit fixed event and a status change to fixed.
WITH sevs AS (
    SELECT severity FROM severities
    UNION SELECT DISTINCT severity FROM issue_events WHERE severity IS NOT NULL
),
counts AS (
    SELECT
        project_id,
        severity,
        count(*) FILTER (WHERE event = 'opened') AS opened,
        count(*) FILTER (WHERE event = 'fixed' OR (event = 'status_changed' AND to_value = 'fixed')) AS fixed,
        count(*) FILTER (WHERE event = 'reopened') AS reopened,
        count(*) FILTER (WHERE event = 'status_changed' AND to_value IN (SELECT status FROM issue_statuses WHERE dismissed))
            AS dismissed,
        count(*) FILTER (WHERE event = 'severity_changed') AS severity_changed
    FROM issue_events
    GROUP BY ALL
)
SELECT p.workspace_id, p.id AS project_id, coalesce(p.name, p.id) AS project, s.severity,
       coalesce(c.opened, 0) AS opened,
       coalesce(c.fixed, 0) AS fixed,
       coalesce(c.reopened, 0) AS reopened,
       coalesce(c.dismissed, 0) AS dismissed,
       coalesce(c.severity_changed, 0) AS severity_changed
FROM projects p
CROSS JOIN sevs s
LEFT JOIN counts c ON c.project_id = p.id AND c.severity = s.severity
WHERE p.removed_at IS NULL
ORDER BY p.workspace_id, p.id, s.severity
