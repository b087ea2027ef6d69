-- Project x severity lifecycle counters of the part's workspace, from issue_events (severity as it was at the
-- event). Every cell of the grid is present, zeros included, so increase() sees the first event of a project.
-- Fixed, reopened and dismissed are status changes as `issue_transitions` reads them (`status_moves` decides
-- what each means: leaving `fixed` is a regression, whichever event recorded it).
WITH events AS (
    SELECT project_id, severity, event, false AS fix, false AS regression, false AS dismissal
    FROM issue_events
    WHERE workspace_id = $workspace_id AND event IN ('opened', 'severity_changed')
    UNION ALL
    SELECT project_id, severity, event, fix, regression, dismissal
    FROM issue_transitions
    WHERE workspace_id = $workspace_id
),
sevs AS (
    SELECT severity FROM severity_grid WHERE workspace_id = $workspace_id
),
counts AS (
    SELECT
        project_id,
        severity,
        count(*) FILTER (WHERE event = 'opened') AS opened,
        count(*) FILTER (WHERE fix) AS fixed,
        count(*) FILTER (WHERE regression) AS reopened,
        count(*) FILTER (WHERE dismissal) AS dismissed,
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
