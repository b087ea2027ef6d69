-- name: open_issues_by_project
-- description: Open issues now per project and severity, with the project's current score and grade.
SELECT
    p.name AS project,
    p.score,
    p.grade,
    count(i.id) FILTER (WHERE i.severity = 'critical') AS critical,
    count(i.id) FILTER (WHERE i.severity = 'high') AS high,
    count(i.id) FILTER (WHERE i.severity = 'medium') AS medium,
    count(i.id) FILTER (WHERE i.severity = 'low') AS low,
    count(i.id) FILTER (WHERE i.severity = 'info') AS info,
    count(i.id) AS total,
    p.id AS project_id
FROM projects AS p
LEFT JOIN issues AS i ON i.project_id = p.id AND i.status = 'open' AND i.hidden_reason IS NULL
WHERE p.removed_at IS NULL
GROUP BY ALL
ORDER BY critical DESC, high DESC, total DESC, project, project_id;
