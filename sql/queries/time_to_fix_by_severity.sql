-- name: time_to_fix_by_severity
-- description: Mean, median and p90 time to fix in days by severity, over issues the service found fixed
--   (fixed_at minus first_seen_at).
--
-- Issues that are open again after a fix are not in the sample: their fixed_at no longer stands.
WITH fixed AS (
    SELECT severity, (epoch(fixed_at) - epoch(first_seen_at)) / 86400.0 AS days
    FROM issues
    WHERE status = 'fixed' AND fixed_at IS NOT NULL AND first_seen_at IS NOT NULL
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
