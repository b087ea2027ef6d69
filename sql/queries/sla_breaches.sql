-- name: sla_breaches
-- description: Open issues older than their severity's SLA (by default critical 7, high 30, medium 90, low 180
--   days since first_seen_at; SCANWATCH_SLA_DAYS as of the last sync), most overdue first.
--
-- The same rule as secscan_issues_sla_breached and the SecscanSlaBreached alert: the policy in `sla_policy`,
-- the clock from first_seen_at (first_observed_at when the service gave none), projects the service lists.
WITH aged AS (
    SELECT i.*, s.days AS sla_days, r.rank AS severity_rank,
           epoch(now()) - epoch(coalesce(i.first_seen_at, i.first_observed_at)) AS age_seconds
    FROM issues AS i
    JOIN sla_policy AS s ON s.severity = i.severity
    LEFT JOIN severities AS r ON r.severity = i.severity
    WHERE i.status = 'open' AND i.hidden_reason IS NULL  -- the service no longer shows hidden ones
)
SELECT
    a.severity,
    floor(a.age_seconds / 86400)::INTEGER AS age_days,
    a.sla_days,
    floor(a.age_seconds / 86400)::INTEGER - a.sla_days AS days_over,
    p.name AS project,
    a.address,
    a.control_id,
    a.title,
    a.first_seen_at,
    a.id AS issue_id
FROM aged AS a
JOIN projects AS p ON p.id = a.project_id AND p.removed_at IS NULL
WHERE a.age_seconds > a.sla_days * 86400
ORDER BY a.age_seconds - a.sla_days * 86400 DESC, a.severity_rank, a.id;
