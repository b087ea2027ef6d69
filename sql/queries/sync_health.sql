-- name: sync_health
-- description: Per ingestion asset: how its last run went, when it last succeeded, and failures in the last 24 hours.
WITH ranked AS (
    SELECT *, row_number() OVER (PARTITION BY asset ORDER BY started_at DESC) AS n
    FROM sync_runs
),
summary AS (
    SELECT
        asset,
        max(finished_at) FILTER (WHERE status = 'success') AS last_success_at,
        count(*) FILTER (WHERE status = 'failure' AND started_at >= now() - INTERVAL 24 HOUR) AS failures_24h
    FROM sync_runs
    GROUP BY asset
)
SELECT
    r.asset,
    r.status AS last_status,
    r.started_at AS last_started_at,
    round(epoch(r.finished_at) - epoch(r.started_at), 1) AS last_duration_s,
    s.last_success_at,
    round((epoch(now()) - epoch(s.last_success_at)) / 3600.0, 1) AS hours_since_success,
    s.failures_24h,
    r.requests,
    r.retries,
    r.rate_limited,
    r.rows_written,
    r.error AS last_error
FROM ranked AS r
JOIN summary AS s USING (asset)
WHERE r.n = 1
ORDER BY (r.status = 'success'), r.asset;
