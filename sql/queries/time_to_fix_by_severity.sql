-- name: time_to_fix_by_severity
-- description: Mean, median and p90 time to fix in days by severity, over issues the service found fixed
--   (fixed_at minus first_seen_at).
--
-- The sample is the `fix_times` view's (migration 012), the one /metrics counts: issues that are open again
-- after a fix are not in it, their fixed_at no longer stands.
WITH fixed AS (
    SELECT severity, seconds / 86400.0 AS days FROM fix_times
)
SELECT
    f.severity,
    count(*) AS fixed_issues,
    round(avg(f.days), 2) AS mean_days,
    round(median(f.days), 2) AS median_days,
    round(quantile_cont(f.days, 0.9), 2) AS p90_days
FROM fixed AS f
LEFT JOIN severities AS r ON r.severity = f.severity
GROUP BY f.severity
ORDER BY any_value(r.rank) NULLS LAST, f.severity;
