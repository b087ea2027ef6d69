-- name: new_critical_this_week
-- description: Critical issues first seen by the service in the last 7 days, newest first, whatever their status now.
SELECT
    i.first_seen_at,
    i.status,
    p.name AS project,
    i.address,
    i.control_id,
    i.family,
    i.title,
    i.id AS issue_id
FROM issues AS i
LEFT JOIN projects AS p ON p.id = i.project_id
WHERE i.severity = 'critical' AND i.first_seen_at >= now() - INTERVAL 7 DAY
ORDER BY i.first_seen_at DESC, i.id;
