-- Project x severity histogram of time to fix over the `fix_times` sample (migration 012), in seconds.
-- buckets[i] is the cumulative count at or below $ttf_buckets[i]; count is the +Inf bucket.
WITH sevs AS (
    SELECT severity FROM severities
    UNION SELECT DISTINCT severity FROM issues WHERE severity IS NOT NULL
),
fixed AS (
    SELECT project_id, severity, seconds AS ttf FROM fix_times
),
bounds AS (
    SELECT unnest($ttf_buckets::DOUBLE[]) AS le
),
cells AS (
    SELECT p.workspace_id, p.id AS project_id, coalesce(p.name, p.id) AS project, s.severity
    FROM projects p CROSS JOIN sevs s
    WHERE p.removed_at IS NULL
),
per_bound AS (
    SELECT c.project_id, c.severity, b.le, count(f.ttf) FILTER (WHERE f.ttf <= b.le) AS n
    FROM cells c
    CROSS JOIN bounds b
    LEFT JOIN fixed f ON f.project_id = c.project_id AND f.severity = c.severity
    GROUP BY ALL
),
totals AS (
    SELECT c.project_id, c.severity, count(f.ttf) AS n, coalesce(sum(f.ttf), 0) AS total
    FROM cells c LEFT JOIN fixed f ON f.project_id = c.project_id AND f.severity = c.severity
    GROUP BY ALL
)
SELECT c.workspace_id, c.project_id, c.project, c.severity,
       (SELECT list(pb.n ORDER BY pb.le) FROM per_bound pb
         WHERE pb.project_id = c.project_id AND pb.severity = c.severity) AS buckets,
       t.n AS count,
       t.total AS sum
FROM cells c
JOIN totals t ON t.project_id = c.project_id AND t.severity = c.severity
ORDER BY c.workspace_id, c.project_id, c.severity
