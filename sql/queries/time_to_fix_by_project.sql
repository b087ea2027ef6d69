-- name: time_to_fix_by_project
-- description: Mean and p90 time to fix in days per project, with the number of fixed and still open issues.
-- The sample is the `fix_times` view's (migration 012), the one /metrics counts.
WITH fixed AS (
    SELECT project_id, seconds / 86400.0 AS days FROM fix_times
),
open_now AS (
    SELECT project_id, count(*) AS open_issues FROM issues
    WHERE status = 'open' AND hidden_reason IS NULL
    GROUP BY project_id
)
SELECT
    f.project_id,
    p.name AS project,
    count(*) AS fixed_issues,
    coalesce(any_value(o.open_issues), 0) AS open_issues,
    round(avg(f.days), 2) AS mean_days,
    round(quantile_cont(f.days, 0.9), 2) AS p90_days
FROM fixed AS f
LEFT JOIN projects AS p ON p.id = f.project_id
LEFT JOIN open_now AS o ON o.project_id = f.project_id
GROUP BY f.project_id, p.name
ORDER BY mean_days DESC, project, f.project_id;
