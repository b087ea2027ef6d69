-- Pipeline health per workspace and asset, from sync_runs (one row per asset materialization).
-- The totals are sums over the whole table, so they only grow: counters for Prometheus.
SELECT
    r.workspace_id,
    coalesce(any_value(a.workspace_name), r.workspace_id, '') AS workspace,
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
FROM sync_runs r
LEFT JOIN accounts a ON a.workspace_id = r.workspace_id
GROUP BY r.workspace_id, r.asset
ORDER BY r.workspace_id NULLS FIRST, r.asset
