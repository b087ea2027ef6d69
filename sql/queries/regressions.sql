-- name: regressions
-- description: Issues that came back after being fixed (reopened events), how often, and where they stand now.
WITH reopenings AS (
    SELECT issue_id, count(DISTINCT observed_at) AS times_reopened, max(observed_at) AS last_reopened_at
    FROM issue_events
    WHERE event = 'reopened' OR (event = 'status_changed' AND from_value = 'fixed' AND to_value = 'open')
    GROUP BY issue_id
)
SELECT
    i.severity,
    r.times_reopened,
    r.last_reopened_at,
    i.status,
    l.workspace,
    l.project,
    i.address,
    i.control_id,
    i.title,
    i.id AS issue_id
FROM reopenings AS r
JOIN issues AS i ON i.id = r.issue_id
LEFT JOIN project_labels AS l ON l.project_id = i.project_id
ORDER BY r.last_reopened_at DESC, i.id;
