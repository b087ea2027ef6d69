-- Open critical issues now, with what a Prometheus label must not carry: title, address, location; and the
-- project's team now (`project_labels`).
SELECT
    o.first_seen_at AS first_seen,
    w.workspace,
    l.team,
    o.project_name AS project,
    o.title,
    o.address,
    o.location,
    o.family,
    o.control_id,
    o.id AS issue_id
FROM open_issues_now AS o
JOIN workspace_labels AS w ON w.workspace_id = o.workspace_id
JOIN project_labels AS l ON l.workspace_id = o.workspace_id AND l.project_id = o.project_id
WHERE o.severity = 'critical' AND w.workspace IN ($workspace) AND l.team IN ($team)
ORDER BY o.first_seen_at, w.workspace, o.id
