-- name: sync_health
-- description: Per workspace and ingestion asset: how its last run went, when it last succeeded, and failures in
--   the last 24 hours; failing ones first.
-- Runs are the `workspace_runs` view's: a run that failed before its workspace was read counts under the
-- workspace its followed name is bound to (or that name alone), so one workspace's success never hides another's
-- failure.
WITH runs AS (
    SELECT *, coalesce(workspace_id, workspace_label) AS workspace_key
    FROM workspace_runs
),
ranked AS (
    SELECT *, row_number() OVER (PARTITION BY workspace_key, asset ORDER BY started_at DESC) AS n
    FROM runs
),
summary AS (
    SELECT
        workspace_key,
        asset,
        max(finished_at) FILTER (WHERE status = 'success') AS last_success_at,
        count(*) FILTER (WHERE status = 'failure' AND started_at >= now() - INTERVAL '24 hours') AS failures_24h
    FROM runs
    GROUP BY workspace_key, asset
)
SELECT
    r.workspace,
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
JOIN summary AS s ON s.workspace_key IS NOT DISTINCT FROM r.workspace_key AND s.asset = r.asset
WHERE r.n = 1
ORDER BY r.status = 'success', r.workspace, r.asset;
