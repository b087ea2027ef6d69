-- Pipeline health of the part's workspace per asset, from sync_runs (one row per asset materialization).
-- The totals are sums over the whole table, so they only grow: counters for Prometheus. A run that failed
-- before its workspace's id was known (a refused key on a first sync) carries only the followed name
-- ($label), and counts here all the same.
WITH r AS (
    SELECT *
    FROM workspace_runs
    WHERE workspace_id = $workspace_id OR (workspace_id IS NULL AND workspace_label = $label)
)
SELECT
    r.asset,
    epoch(max(r.finished_at) FILTER (WHERE r.status = 'success')) AS last_success,
    epoch(max(coalesce(r.finished_at, r.started_at))) AS last_run,
    CASE arg_max(r.status, coalesce(r.finished_at, r.started_at)) WHEN 'success' THEN 1 ELSE 0 END AS last_run_ok,
    arg_max(epoch(r.finished_at) - epoch(r.started_at), coalesce(r.finished_at, r.started_at))
        AS last_duration,
    count(*) FILTER (WHERE r.status = 'success') AS runs_success,
    count(*) FILTER (WHERE r.status <> 'success') AS runs_failure,
    coalesce(sum(r.requests), 0) AS requests,
    coalesce(sum(r.retries), 0) AS retries,
    coalesce(sum(r.rate_limited), 0) AS rate_limited,
    coalesce(sum(r.rows_written), 0) AS rows_written,
    arg_max(r.rate_limit_remaining, coalesce(r.finished_at, r.started_at))
        FILTER (WHERE r.rate_limit_remaining IS NOT NULL) AS rate_limit_remaining
FROM r
GROUP BY r.asset
ORDER BY r.asset;
