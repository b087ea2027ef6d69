-- name: sla_breaches
-- description: Open issues older than their severity's SLA (critical 7, high 30, medium 90, low 180 days since
--   first_seen_at), most overdue first.
WITH sla(severity, sla_days) AS (
    VALUES ('critical', 7), ('high', 30), ('medium', 90), ('low', 180)
),
aged AS (
    SELECT i.*, s.sla_days, floor((epoch(now()) - epoch(i.first_seen_at)) / 86400)::INTEGER AS age_days
    FROM issues AS i
    JOIN sla AS s ON s.severity = i.severity
    WHERE i.status = 'open' AND i.hidden_reason IS NULL  -- the service no longer shows hidden ones
)
SELECT
    a.severity,
    a.age_days,
    a.sla_days,
    a.age_days - a.sla_days AS days_over,
    p.name AS project,
    a.address,
    a.control_id,
    a.title,
    a.first_seen_at,
    a.id AS issue_id
FROM aged AS a
LEFT JOIN projects AS p ON p.id = a.project_id
WHERE a.age_days > a.sla_days
ORDER BY days_over DESC, list_position(['critical', 'high', 'medium', 'low'], a.severity), a.id;
