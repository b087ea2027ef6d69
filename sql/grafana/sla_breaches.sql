-- Open issues past their severity's SLA now (`issue_sla`: breached once the clock passes breach_at, on the
-- project's SLA profile), most overdue first, with the project's team.
SELECT
    epoch(now()) - s.breach_at AS overdue,
    s.severity,
    s.sla_days,
    s.first_seen_at AS first_seen,
    w.workspace,
    s.team,
    s.project,
    s.title,
    s.address,
    s.location,
    s.issue_id
FROM issue_sla AS s
JOIN workspace_labels AS w ON w.workspace_id = s.workspace_id
WHERE w.workspace IN ($workspace) AND s.team IN ($team) AND epoch(now()) > s.breach_at
ORDER BY overdue DESC, s.issue_id
