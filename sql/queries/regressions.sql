-- name: regressions
-- description: Issues that came back after being fixed (reopened events), how often, and where they stand now.
WITH reopenings AS (
    SELECT issue_id, observed_at
    FROM issue_events
    WHERE event = 'reopened' OR (event = 'status_changed' AND from_value = 'fixed' AND to_value = 'open')
)
SELECT
    i.severity,
    count(DISTINCT r.observed_at) AS times_reopened,
    max(r.observed_at) AS last_reopened_at,
    i.status,
    p.name AS project,
    i.address,
    i.control_id,
    i.title,
    i.id AS issue_id
FROM reopenings AS r
JOIN issues AS i ON i.id = r.issue_id
LEFT JOIN projects AS p ON p.id = i.project_id
GROUP BY ALL
ORDER BY last_reopened_at DESC, i.id;
