-- The latest reading of each quota per workspace.
SELECT
    q.workspace_id,
    q.quota,
    q."limit" AS quota_limit,
    q.used,
    q.remaining,
    epoch(q.period_start) AS period_start,
    epoch(q.period_end) AS period_end,
    epoch(q.observed_at) AS observed_at
FROM quota_snapshots q
QUALIFY row_number() OVER (PARTITION BY q.workspace_id, q.quota ORDER BY q.observed_at DESC) = 1
ORDER BY q.workspace_id, q.quota
