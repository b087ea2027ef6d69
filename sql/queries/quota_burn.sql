-- name: quota_burn
-- description: Each quota at the last sync: used against the elapsed part of its period, and the use it is on
--   course for by the period's end (burn above 1.0 runs out early).
--
-- Elapsed is measured at the snapshot, not now, so the two fractions describe the same moment.
WITH latest AS (
    SELECT *
    FROM quota_snapshots
    QUALIFY row_number() OVER (PARTITION BY workspace_id, quota ORDER BY observed_at DESC) = 1
),
measured AS (
    SELECT
        *,
        greatest(0.0, least(1.0,
            (epoch(observed_at) - epoch(period_start)) / nullif(epoch(period_end) - epoch(period_start), 0)
        )) AS elapsed_fraction,
        used / nullif("limit", 0) AS used_fraction
    FROM latest
)
SELECT
    quota,
    "limit",
    used,
    remaining,
    round(used_fraction, 3) AS used_fraction,
    round(elapsed_fraction, 3) AS elapsed_fraction,
    round(used_fraction / nullif(elapsed_fraction, 0), 2) AS burn,
    CAST(round(used / nullif(elapsed_fraction, 0)) AS INTEGER) AS projected_use,
    CASE
        WHEN "limit" = 0 THEN 'not in plan'
        WHEN remaining <= 0 THEN 'exhausted'
        WHEN used / nullif(elapsed_fraction, 0) > "limit" THEN 'runs out before period end'
        ELSE 'on track'
    END AS outlook,
    period_start,
    period_end,
    observed_at,
    workspace_id
FROM measured
ORDER BY workspace_id, list_position(['quick_scans', 'audits', 'fixes'], quota) NULLS LAST, quota;
