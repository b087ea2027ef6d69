-- name: new_critical_issues
-- description: Critical issues that arrived since the first sync and are still open (new, reopened, raised to critical, mark withdrawn): what SecscanNewCriticalIssue pages on, newest first, with their full text.
SELECT
    a.arrived_at,
    a.change,
    a.from_severity,
    w.workspace,
    po.team,
    a.project,
    a.address,
    a.title,
    a.family,
    a.control_id,
    a.location,
    a.first_seen_at,
    i.explanation,
    a.issue_id
FROM critical_arrivals AS a
JOIN issues AS i ON i.id = a.issue_id
LEFT JOIN workspace_labels AS w ON w.workspace_id = a.workspace_id
LEFT JOIN project_owners_now AS po ON po.workspace_id = a.workspace_id AND po.project_id = a.project_id
ORDER BY a.arrived_at DESC, a.issue_id;
