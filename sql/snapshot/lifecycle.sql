-- Project x severity lifecycle counters of the part's workspace, from issue_events (severity as it was at the
-- event). Every cell of the grid is present, zeros included, so increase() sees the first event of a project.
-- "fixed" accepts both an explicit fixed event and a status change to fixed.
WITH events AS (
    SELECT project_id, severity, event, to_value
    FROM issue_events
    WHERE workspace_id = $workspace_id
),
sevs AS (
    SELECT severity FROM severities
    UNION SELECT DISTINCT severity FROM events WHERE severity IS NOT NULL
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
    FROM events
    GROUP BY project_id, severity
)
SELECT l.workspace_id, l.team, l.project_id, l.project, s.severity,
       coalesce(c.opened, 0) AS opened,
       coalesce(c.fixed, 0) AS fixed,
       coalesce(c.reopened, 0) AS reopened,
       coalesce(c.dismissed, 0) AS dismissed,
       coalesce(c.severity_changed, 0) AS severity_changed
FROM project_labels AS l
CROSS JOIN sevs AS s
LEFT JOIN counts AS c ON c.project_id = l.project_id AND c.severity = s.severity
WHERE l.workspace_id = $workspace_id AND l.listed
ORDER BY l.project_id, s.severity;
