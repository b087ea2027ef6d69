-- Open issues past their severity's SLA now (`issue_sla`: breached once the clock passes breach_at), most
-- overdue first.
SELECT
    epoch(now()) - s.breach_at AS overdue,
    s.severity,
    s.sla_days,
    o.first_seen_at AS first_seen,
    w.workspace,
    o.project_name AS project,
    o.title,
    o.address,
    o.location,
    s.issue_id
FROM issue_sla AS s
JOIN open_issues_now AS o ON o.workspace_id = s.workspace_id AND o.id = s.issue_id
JOIN workspace_labels AS w ON w.workspace_id = s.workspace_id
WHERE w.workspace IN ($workspace) AND epoch(now()) > s.breach_at
ORDER BY overdue DESC, s.issue_id
