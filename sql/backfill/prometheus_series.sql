-- The samples of /metrics' own series at the staged instants, labelled as the exporter labels them
-- (sql/snapshot): workspace name, project name, target address and kind. Projects the service no longer
-- lists keep their past. Quotas are known only from the syncs' quota_snapshots, so they start there.
-- The recording rules over the lifecycle counters get their past from the same changes: issues first seen,
-- and found fixed, in the day before each instant, per severity (their rule sums away every other label).
WITH ws AS (
    SELECT coalesce(a.workspace_name, a.workspace_id) AS workspace
    FROM accounts AS a WHERE a.workspace_id = $workspace_id
    UNION ALL SELECT $workspace_id WHERE NOT EXISTS (SELECT 1 FROM accounts WHERE workspace_id = $workspace_id)
),
quota_instants AS (
    SELECT q.quota, i.ts
    FROM _bf_instants AS i
    JOIN (SELECT quota, min(observed_at) AS since FROM quota_snapshots WHERE workspace_id = $workspace_id
          GROUP BY quota) AS q ON i.ts > q.since
),
quotas AS (
    SELECT x.quota, x.ts, s."limit", s.used, s.remaining
    FROM quota_instants AS x
    ASOF JOIN (SELECT * FROM quota_snapshots WHERE workspace_id = $workspace_id) AS s
        ON s.quota = x.quota AND x.ts > s.observed_at
),
severity_instants AS (
    SELECT i.ts, s.severity
    FROM _bf_instants AS i
    CROSS JOIN (SELECT DISTINCT severity FROM _bf_cells) AS s
    WHERE i.ts > (SELECT min(since) FROM _bf_cells)
),
upto_now AS (
    SELECT x.ts, x.severity, coalesce(r.opened, 0) AS opened, coalesce(r.fixed, 0) AS fixed
    FROM severity_instants AS x
    ASOF LEFT JOIN _bf_arrivals_running AS r ON r.severity = x.severity AND x.ts > r.ts
),
upto_day_before AS (
    SELECT x.ts, x.severity, coalesce(r.opened, 0) AS opened, coalesce(r.fixed, 0) AS fixed
    FROM (SELECT ts, severity, ts - INTERVAL 1 DAY AS day_before FROM severity_instants) AS x
    ASOF LEFT JOIN _bf_arrivals_running AS r ON r.severity = x.severity AND x.day_before > r.ts
),
arrivals AS (
    SELECT n.ts, n.severity, n.opened - d.opened AS opened, n.fixed - d.fixed AS fixed
    FROM upto_now AS n
    JOIN upto_day_before AS d ON d.ts = n.ts AND d.severity = n.severity
),
samples AS (
    SELECT 'secscan_project_score' AS metric, s.project_id, NULL AS target_id, NULL AS severity,
           NULL AS quota, s.ts, CAST(s.score AS DOUBLE) AS value
    FROM _bf_scores_at AS s WHERE s.target_id IS NULL AND s.score IS NOT NULL
    UNION ALL
    SELECT 'secscan_target_score', s.project_id, s.target_id, NULL, NULL, s.ts, s.score
    FROM _bf_scores_at AS s WHERE s.target_id IS NOT NULL
    UNION ALL
    SELECT 'secscan_issues_open', o.project_id, NULL, o.severity, NULL, o.ts, o.open_issues
    FROM _bf_open_at AS o
    UNION ALL
    SELECT 'secscan_quota_limit', NULL, NULL, NULL, quota, ts, "limit" FROM quotas WHERE "limit" IS NOT NULL
    UNION ALL
    SELECT 'secscan_quota_used', NULL, NULL, NULL, quota, ts, used FROM quotas WHERE used IS NOT NULL
    UNION ALL
    SELECT 'secscan_quota_remaining', NULL, NULL, NULL, quota, ts, remaining FROM quotas WHERE remaining IS NOT NULL
    UNION ALL
    SELECT 'secscan:issues_opened:increase1d', NULL, NULL, severity, NULL, ts, opened FROM arrivals
    UNION ALL
    SELECT 'secscan:issues_fixed:increase1d', NULL, NULL, severity, NULL, ts, fixed FROM arrivals
)
SELECT
    s.metric,
    (SELECT workspace FROM ws) AS workspace,
    s.project_id,
    coalesce(p.name, s.project_id) AS project,
    s.target_id,
    t.address,
    t.kind,
    s.severity,
    s.quota,
    epoch(s.ts) AS ts,
    s.value
FROM samples AS s
LEFT JOIN projects AS p ON p.id = s.project_id
LEFT JOIN targets AS t ON t.id = s.target_id
ORDER BY s.metric, s.ts
