-- Pipeline health of the part's workspace per asset, from sync_runs (one row per asset materialization).
-- The totals are sums over the whole table, so they only grow: counters for Prometheus. A run that failed
-- before its workspace's id was known (a refused key on a first sync) carries only the followed name
-- ($label), and counts here all the same.
WITH r AS (
    SELECT *, coalesce(finished_at, started_at) AS ran_at
    FROM workspace_runs
    WHERE workspace_id = $workspace_id OR (workspace_id IS NULL AND workspace_label = $label)
),
-- Per asset: its latest run, its latest run with a duration, its latest reading of the rate limit. Ranked
-- once rather than aggregated with arg_max, which PostgreSQL's compatibility layer evaluates row by row.
ranked AS (
    SELECT *,
           row_number() OVER (PARTITION BY asset ORDER BY ran_at DESC NULLS LAST, run_id DESC) AS latest,
           row_number() OVER (PARTITION BY asset ORDER BY (finished_at IS NULL OR started_at IS NULL), ran_at DESC NULLS LAST,
                                                           run_id DESC) AS latest_timed,
           row_number() OVER (PARTITION BY asset ORDER BY (rate_limit_remaining IS NULL), ran_at DESC NULLS LAST,
                                                           run_id DESC) AS latest_reading
    FROM r
)
SELECT
    r.asset,
    epoch(max(r.finished_at) FILTER (WHERE r.status = 'success')) AS last_success,
    epoch(max(r.ran_at)) AS last_run,
    max(CASE WHEN r.latest = 1 THEN CASE r.status WHEN 'success' THEN 1 ELSE 0 END END) AS last_run_ok,
    max(CASE WHEN r.latest_timed = 1 THEN epoch(r.finished_at) - epoch(r.started_at) END) AS last_duration,
    count(*) FILTER (WHERE r.status = 'success') AS runs_success,
    count(*) FILTER (WHERE r.status <> 'success') AS runs_failure,
    coalesce(sum(r.requests), 0) AS requests,
    coalesce(sum(r.retries), 0) AS retries,
    coalesce(sum(r.rate_limited), 0) AS rate_limited,
    coalesce(sum(r.rows_written), 0) AS rows_written,
    max(CASE WHEN r.latest_reading = 1 THEN r.rate_limit_remaining END) AS rate_limit_remaining
FROM ranked AS r
GROUP BY r.asset
ORDER BY r.asset;
