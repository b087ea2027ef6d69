-- Pipeline health per workspace and asset, from sync_runs (one row per asset materialization).
-- The totals are sums over the whole table, so they only grow: counters for Prometheus.
-- A run that failed before its workspace's id was known (a refused key on a first sync) counts under the
-- workspace its followed name is bound to, or under that name alone while it has never been read.
WITH r AS (
    SELECT s.*, coalesce(s.workspace_id, b.workspace_id) AS resolved_id
    FROM sync_runs s
    LEFT JOIN accounts b ON s.workspace_id IS NULL AND b.workspace_label = s.workspace_label
)
SELECT
    r.resolved_id AS workspace_id,
    coalesce(any_value(a.workspace_label), any_value(a.workspace_name), any_value(r.workspace_label),
             r.resolved_id, '') AS workspace,
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
LEFT JOIN accounts a ON a.workspace_id = r.resolved_id
GROUP BY r.resolved_id, CASE WHEN r.resolved_id IS NULL THEN r.workspace_label END, r.asset
ORDER BY r.resolved_id NULLS FIRST, workspace, r.asset
