-- name: time_to_fix_by_severity
-- description: Mean, median and p90 time to fix in days per workspace and severity, over issues the service found
--   fixed (fixed_at minus first_seen_at).
--
-- The sample is the `fix_times` view's, the one /metrics counts: issues that are open again after a fix are not
-- in it, their fixed_at no longer stands.
WITH fixed AS (
    SELECT workspace_id, severity, seconds / 86400.0 AS days FROM fix_times
)
SELECT
    w.workspace,
    f.severity,
    count(*) AS fixed_issues,
    round(avg(f.days), 2) AS mean_days,
    round(percentile_cont(0.5) WITHIN GROUP (ORDER BY f.days), 2) AS median_days,
    round(percentile_cont(0.9) WITHIN GROUP (ORDER BY f.days), 2) AS p90_days
FROM fixed AS f
LEFT JOIN workspace_labels AS w ON w.workspace_id = f.workspace_id
LEFT JOIN severities AS r ON r.severity = f.severity
GROUP BY w.workspace, f.workspace_id, f.severity
ORDER BY w.workspace, f.workspace_id, min(r.rank), f.severity;
