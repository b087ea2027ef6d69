-- Open critical issues now, with what a Prometheus label must not carry: title, address, location.
SELECT
    o.first_seen_at AS first_seen,
    w.workspace,
    o.project_name AS project,
    o.title,
    o.address,
    o.location,
    o.family,
    o.control_id,
    o.id AS issue_id
FROM open_issues_now AS o
JOIN workspace_labels AS w ON w.workspace_id = o.workspace_id
WHERE o.severity = 'critical' AND w.workspace IN ($workspace)
ORDER BY o.first_seen_at, w.workspace, o.id
