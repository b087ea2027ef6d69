-- name: time_to_fix_by_project
-- description: Mean and p90 time to fix in days per project, with the number of fixed and still open issues.
-- The sample is the `fix_times` view's, the one /metrics counts; open issues are `open_issues_now`'s.
WITH fixed AS (
    SELECT project_id, seconds / 86400.0 AS days FROM fix_times
),
open_now AS (
    SELECT project_id, count(*) AS open_issues FROM open_issues_now GROUP BY project_id
)
SELECT
    f.project_id,
    l.workspace,
    l.team,
    l.project,
    count(*) AS fixed_issues,
    coalesce(max(o.open_issues), 0) AS open_issues,
    round(avg(f.days), 2) AS mean_days,
    round(percentile_cont(0.9) WITHIN GROUP (ORDER BY f.days), 2) AS p90_days
FROM fixed AS f
LEFT JOIN project_labels AS l ON l.project_id = f.project_id
LEFT JOIN open_now AS o ON o.project_id = f.project_id
GROUP BY f.project_id, l.workspace, l.team, l.project
ORDER BY mean_days DESC, l.workspace, l.project, f.project_id;
