-- name: sla_breaches
-- description: Open issues older than their severity's SLA (by default critical 7, high 30, medium 90, low 180
--   days since first_seen_at; SCANWATCH_SLA_DAYS as of the last sync), most overdue first.
--
-- The rule is the `issue_sla` view's, which secscan_issues_sla_breached and the SecscanSlaBreached alert read:
-- open and visible issues of projects the service lists, the policy in `sla_policy`, the clock from
-- first_seen_at (first_observed_at when the service gave none).
SELECT
    s.severity,
    CAST(floor((epoch(now()) - s.opened_at) / 86400) AS INTEGER) AS age_days,
    s.sla_days,
    CAST(floor((epoch(now()) - s.opened_at) / 86400) AS INTEGER) - s.sla_days AS days_over,
    o.workspace,
    s.team,
    s.sla_profile,
    o.project,
    i.address,
    i.control_id,
    i.title,
    i.first_seen_at,
    s.issue_id
FROM issue_sla AS s
JOIN issues AS i ON i.id = s.issue_id
LEFT JOIN project_labels AS o ON o.project_id = s.project_id
LEFT JOIN severities AS r ON r.severity = s.severity
WHERE epoch(now()) > s.breach_at
ORDER BY epoch(now()) - s.breach_at DESC, r.rank, s.issue_id;
