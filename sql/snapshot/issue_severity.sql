-- Project x severity grid of the part's workspace: open now, ever detected, oldest open age, SLA breached and
-- due soon. Open issues, their ages and SLA states are the `issue_sla` view's (the SLA rule's one home);
-- "detected" counts every issue ever seen under the severity it was first seen with (`first_severities`),
-- so the counter never moves down when a severity changes. `sla_days` is the project's SLA profile's
-- (docs/ownership.md): its own days for the severity, else the default profile's (`sla_policy`).
WITH sevs AS (
    SELECT severity, sla_days FROM severity_grid WHERE workspace_id = $workspace_id
),
grid AS (
    SELECT l.workspace_id, l.team, l.project_id, l.project, s.severity,
           CASE WHEN s.sla_days IS NOT NULL THEN coalesce(CAST(sp.days AS DOUBLE PRECISION), s.sla_days) END AS sla_days
    FROM project_labels AS l CROSS JOIN sevs AS s
    LEFT JOIN project_owners_now AS o ON o.workspace_id = l.workspace_id AND o.project_id = l.project_id
    LEFT JOIN sla_profiles AS sp ON sp.profile = o.sla_profile AND sp.severity = s.severity
    WHERE l.workspace_id = $workspace_id AND l.listed
),
open_issues AS (
    SELECT project_id, severity,
           count(*) AS n,
           max(epoch(CAST($now AS TIMESTAMPTZ)) - opened_at) AS oldest,
           count(*) FILTER (WHERE epoch(CAST($now AS TIMESTAMPTZ)) > breach_at) AS breached,
           count(*) FILTER (WHERE epoch(CAST($now AS TIMESTAMPTZ)) > due_soon_at
                              AND epoch(CAST($now AS TIMESTAMPTZ)) <= breach_at) AS due_soon
    FROM issue_sla
    WHERE workspace_id = $workspace_id
    GROUP BY project_id, severity
),
detected AS (
    SELECT project_id, severity, count(*) AS n
    FROM first_severities
    WHERE workspace_id = $workspace_id
    GROUP BY project_id, severity
)
SELECT
    g.workspace_id,
    g.team,
    g.project_id,
    g.project,
    g.severity,
    g.sla_days,
    coalesce(o.n, 0) AS open,
    coalesce(o.oldest, 0) AS oldest_open_age,
    coalesce(o.breached, 0) AS sla_breached,
    coalesce(o.due_soon, 0) AS sla_due_soon,
    coalesce(d.n, 0) AS detected
FROM grid AS g
LEFT JOIN open_issues AS o ON o.project_id = g.project_id AND o.severity = g.severity
LEFT JOIN detected AS d ON d.project_id = g.project_id AND d.severity = g.severity
ORDER BY g.project_id, g.severity;
