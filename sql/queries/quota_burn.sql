-- name: quota_burn
-- description: Each quota at the last sync: used against the elapsed part of its period, and the use it is on
--   course for by the period's end (burn above 1.0 runs out early).
--
-- Elapsed is measured at the snapshot, not now, so the two fractions describe the same moment.
WITH latest AS (
    SELECT *
    FROM (
        SELECT q.*, row_number() OVER (PARTITION BY q.workspace_id, q.quota ORDER BY q.observed_at DESC) AS n
        FROM quota_snapshots AS q
    ) AS ranked
    WHERE n = 1
),
measured AS (
    SELECT
        *,
        greatest(0.0, least(1.0,
            (epoch(observed_at) - epoch(period_start)) / nullif(epoch(period_end) - epoch(period_start), 0)
        )) AS elapsed_fraction,
        used / nullif(CAST("limit" AS DOUBLE PRECISION), 0) AS used_fraction
    FROM latest
)
SELECT
    w.workspace,
    m.quota,
    m."limit",
    m.used,
    m.remaining,
    round(m.used_fraction, 3) AS used_fraction,
    round(m.elapsed_fraction, 3) AS elapsed_fraction,
    round(m.used_fraction / nullif(m.elapsed_fraction, 0), 2) AS burn,
    CAST(round(m.used / nullif(m.elapsed_fraction, 0)) AS INTEGER) AS projected_use,
    CASE
        WHEN m."limit" = 0 THEN 'not in plan'
        WHEN m.remaining <= 0 THEN 'exhausted'
        WHEN m.used / nullif(m.elapsed_fraction, 0) > m."limit" THEN 'runs out before period end'
        ELSE 'on track'
    END AS outlook,
    m.period_start,
    m.period_end,
    m.observed_at,
    m.workspace_id
FROM measured AS m
LEFT JOIN workspace_labels AS w ON w.workspace_id = m.workspace_id
ORDER BY w.workspace, m.workspace_id,
         CASE m.quota WHEN 'quick_scans' THEN 1 WHEN 'audits' THEN 2 WHEN 'fixes' THEN 3 END, m.quota;
