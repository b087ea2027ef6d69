-- The latest reading of each quota of the part's workspace.
SELECT workspace_id, quota, quota_limit, used, remaining, period_start, period_end, observed_at
FROM (
    SELECT
        q.workspace_id,
        q.quota,
        q."limit" AS quota_limit,
        q.used,
        q.remaining,
        epoch(q.period_start) AS period_start,
        epoch(q.period_end) AS period_end,
        epoch(q.observed_at) AS observed_at,
        row_number() OVER (PARTITION BY q.quota ORDER BY q.observed_at DESC) AS n
    FROM quota_snapshots AS q
    WHERE q.workspace_id = $workspace_id
) AS latest
WHERE n = 1
ORDER BY quota;
