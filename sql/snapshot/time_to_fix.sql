-- Project x severity histogram of the part's time to fix over the `fix_times` sample, in seconds.
-- buckets[i] is the cumulative count at or below $ttf_buckets[i]; count is the +Inf bucket.
WITH sevs AS (
    SELECT severity FROM severities
    UNION SELECT DISTINCT severity FROM issues WHERE workspace_id = $workspace_id AND severity IS NOT NULL
),
fixed AS (
    SELECT project_id, severity, seconds AS ttf FROM fix_times WHERE workspace_id = $workspace_id
),
bounds AS (
    SELECT unnest(CAST($ttf_buckets AS DOUBLE PRECISION[])) AS le
),
cells AS (
    SELECT l.workspace_id, l.project_id, l.project, s.severity
    FROM project_labels AS l CROSS JOIN sevs AS s
    WHERE l.workspace_id = $workspace_id AND l.listed
),
per_bound AS (
    SELECT c.project_id, c.severity, b.le, count(f.ttf) FILTER (WHERE f.ttf <= b.le) AS n
    FROM cells AS c
    CROSS JOIN bounds AS b
    LEFT JOIN fixed AS f ON f.project_id = c.project_id AND f.severity = c.severity
    GROUP BY c.project_id, c.severity, b.le
),
totals AS (
    SELECT c.project_id, c.severity, count(f.ttf) AS n, coalesce(sum(f.ttf), 0) AS total
    FROM cells AS c LEFT JOIN fixed AS f ON f.project_id = c.project_id AND f.severity = c.severity
    GROUP BY c.project_id, c.severity
)
SELECT c.workspace_id, c.project_id, c.project, c.severity,
       (SELECT array_agg(pb.n ORDER BY pb.le) FROM per_bound AS pb
         WHERE pb.project_id = c.project_id AND pb.severity = c.severity) AS buckets,
       t.n AS count,
       t.total AS sum
FROM cells AS c
JOIN totals AS t ON t.project_id = c.project_id AND t.severity = c.severity
ORDER BY c.project_id, c.severity;
