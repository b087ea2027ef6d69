-- Project x severity histogram of the part's time to fix over the `fix_times` sample, in seconds.
-- buckets[i] is the cumulative count at or below $ttf_buckets[i]; count is the +Inf bucket.
WITH sevs AS (
    SELECT severity FROM severity_grid WHERE workspace_id = $workspace_id
),
fixed AS (
    SELECT project_id, severity, seconds AS ttf FROM fix_times WHERE workspace_id = $workspace_id
),
bounds AS (
    SELECT unnest(CAST($ttf_buckets AS DOUBLE PRECISION[])) AS le
),
cells AS (
    SELECT l.workspace_id, l.team, l.project_id, l.project, s.severity
    FROM project_labels AS l CROSS JOIN sevs AS s
    WHERE l.workspace_id = $workspace_id AND l.listed
),
-- The cumulative count at each bound, in one ordered pass: the sample's times and the bounds of every cell
-- sorted together, each bound taking the running count of the times at or below it (a time equal to a bound
-- sorts before it). Pairing every time with every bound would sort cells x bounds x fixed issues rows.
marks AS (
    SELECT project_id, severity, ttf AS mark_at, 1 AS fixed FROM fixed
    UNION ALL
    SELECT c.project_id, c.severity, b.le, 0 FROM cells AS c CROSS JOIN bounds AS b
),
per_bound AS (
    SELECT project_id, severity, le, n
    FROM (
        SELECT project_id, severity, mark_at AS le, fixed,
               sum(fixed) OVER (PARTITION BY project_id, severity ORDER BY mark_at, fixed DESC
                                ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n
        FROM marks
    ) AS running
    WHERE fixed = 0
),
-- Grouped once and joined, not a subquery per cell: PostgreSQL would run that subquery's scan of the
-- sample once per cell.
bucket_lists AS (
    SELECT project_id, severity, array_agg(CAST(n AS BIGINT) ORDER BY le) AS buckets
    FROM per_bound
    GROUP BY project_id, severity
),
totals AS (
    SELECT c.project_id, c.severity, count(f.ttf) AS n, coalesce(sum(f.ttf), 0) AS total
    FROM cells AS c LEFT JOIN fixed AS f ON f.project_id = c.project_id AND f.severity = c.severity
    GROUP BY c.project_id, c.severity
)
SELECT c.workspace_id, c.team, c.project_id, c.project, c.severity,
       bl.buckets,
       t.n AS count,
       t.total AS sum
FROM cells AS c
JOIN totals AS t ON t.project_id = c.project_id AND t.severity = c.severity
JOIN bucket_lists AS bl ON bl.project_id = c.project_id AND bl.severity = c.severity
ORDER BY c.project_id, c.severity;
