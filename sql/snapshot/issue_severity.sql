-- Project x severity grid: open now, ever detected, oldest open age, SLA breached and due soon.
-- "Detected" counts every issue ever seen under the severity it was first seen with (from its
-- opened event when there is one), so the counter never moves down when a severity changes.
-- SLA clocks start at the service's first_seen_at; the policy is `sla_policy` (info issues have none).
WITH sev AS (
    SELECT s.severity, p.days::DOUBLE AS sla_days
    FROM severities s LEFT JOIN sla_policy p ON p.severity = s.severity
),
sevs AS (
    SELECT severity, sla_days FROM sev
    UNION ALL
    SELECT DISTINCT i.severity, NULL FROM issues i
    WHERE i.severity IS NOT NULL AND i.severity NOT IN (SELECT severity FROM sev)
),
grid AS (
    SELECT p.workspace_id, p.id AS project_id, coalesce(p.name, p.id) AS project, s.severity, s.sla_days
    FROM projects p CROSS JOIN sevs s
    WHERE p.removed_at IS NULL
),
first_sev AS (
    SELECT issue_id, arg_min(severity, observed_at) AS severity
    FROM issue_events
    WHERE event = 'opened' AND severity IS NOT NULL
    GROUP BY issue_id
),
open_issues AS (
    SELECT i.project_id, i.severity,
           epoch($now::TIMESTAMPTZ) - epoch(coalesce(i.first_seen_at, i.first_observed_at)) AS age
    FROM issues i
    WHERE i.status = 'open' AND i.hidden_reason IS NULL  -- an issue the service no longer shows is not open
),
detected AS (
    SELECT i.project_id, coalesce(f.severity, i.severity) AS severity, count(*) AS n
    FROM issues i LEFT JOIN first_sev f ON f.issue_id = i.id
    GROUP BY ALL
)
SELECT
    g.workspace_id,
    g.project_id,
    g.project,
    g.severity,
    g.sla_days,
    count(o.age) AS open,
    coalesce(max(o.age), 0) AS oldest_open_age,
    count(o.age) FILTER (WHERE g.sla_days IS NOT NULL AND o.age > g.sla_days * 86400) AS sla_breached,
    count(o.age) FILTER (
        WHERE g.sla_days IS NOT NULL AND o.age <= g.sla_days * 86400
          AND o.age > g.sla_days * 86400 * (1 - $due_soon_fraction::DOUBLE)
    ) AS sla_due_soon,
    coalesce(any_value(d.n), 0) AS detected
FROM grid g
LEFT JOIN open_issues o ON o.project_id = g.project_id AND o.severity = g.severity
LEFT JOIN detected d ON d.project_id = g.project_id AND d.severity = g.severity
GROUP BY g.workspace_id, g.project_id, g.project, g.severity, g.sla_days
ORDER BY g.workspace_id, g.project_id, g.severity
