-- name: new_critical_this_week
-- description: Critical issues first seen by the service in the last 7 days, newest first, whatever their status now.
SELECT
    i.first_seen_at,
    i.status,
    l.workspace,
    l.team,
    l.project,
    i.address,
    i.control_id,
    i.family,
    i.title,
    i.id AS issue_id
FROM issues AS i
LEFT JOIN project_labels AS l ON l.project_id = i.project_id
WHERE i.severity = 'critical' AND i.first_seen_at >= now() - INTERVAL '7 days'
ORDER BY i.first_seen_at DESC, i.id;
