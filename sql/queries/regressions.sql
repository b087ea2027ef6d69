-- name: regressions
-- description: Issues that came back after a fix (any change out of fixed), how often, and where they stand now.
-- What counts as coming back is the `reopenings` view's, which the history dashboard reads too.
WITH per_issue AS (
    SELECT workspace_id, issue_id, project_id, severity, status, address, control_id, title,
           count(*) AS times_reopened, max(reopened_at) AS last_reopened_at
    FROM reopenings
    GROUP BY workspace_id, issue_id, project_id, severity, status, address, control_id, title
)
SELECT
    r.severity,
    r.times_reopened,
    r.last_reopened_at,
    r.status,
    l.workspace,
    l.team,
    l.project,
    r.address,
    r.control_id,
    r.title,
    r.issue_id
FROM per_issue AS r
LEFT JOIN project_labels AS l ON l.workspace_id = r.workspace_id AND l.project_id = r.project_id
ORDER BY r.last_reopened_at DESC, r.issue_id;
