-- name: recent_changes
-- description: Every issue change observed in the last 7 days (opened, status and severity changes, reopenings),
--   newest first.
SELECT
    e.observed_at,
    e.event,
    e.from_value,
    e.to_value,
    e.severity,
    l.workspace,
    l.team,
    l.project,
    i.address,
    i.control_id,
    i.title,
    e.issue_id
FROM issue_events AS e
LEFT JOIN issues AS i ON i.id = e.issue_id
LEFT JOIN project_labels AS l ON l.project_id = e.project_id
WHERE e.observed_at >= now() - INTERVAL '7 days'
ORDER BY e.observed_at DESC, e.issue_id, e.event;
