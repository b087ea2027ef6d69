-- The samples of /metrics' own series at the staged instants, with the labels the exporter gives them: the
-- workspace's and the project's labels from the views layer (`workspace_labels`, `project_labels`, which the
-- snapshot reads too), the target's address and kind. Projects the service no longer lists keep their past.
-- A project's team is the one that owned it at the instant (`project_owner_periods`: before ownership was
-- first recorded, the first recorded team), so its backfilled and live series are one series.
-- Quotas are known only from the syncs' quota_snapshots, so they start there.
-- The recording rules over the lifecycle counters get their past from the same changes: issues first seen,
-- and found fixed, in the $window_seconds before each instant (the window their rule's increase() spans), per
-- severity (their rule sums away every other label).
-- Each row's `source` names what it computes; the series it is written under is the catalogue's
-- (pipelines/snapshot/catalogue.py: a family's `past`, a recording rule's `source`), never named here.
WITH quota_instants AS (
    SELECT q.quota, i.ts
    FROM _bf_instants AS i
    JOIN (SELECT quota, min(observed_at) AS since FROM quota_snapshots WHERE workspace_id = $workspace_id
          GROUP BY quota) AS q ON i.ts > q.since
),
-- Each quota at an instant: its last reading before it.
quotas AS (
    SELECT x.quota, x.ts,
           arg_max(s."limit", s.observed_at) AS quota_limit,
           arg_max(s.used, s.observed_at) AS used,
           arg_max(s.remaining, s.observed_at) AS remaining
    FROM quota_instants AS x
    JOIN quota_snapshots AS s ON s.workspace_id = $workspace_id AND s.quota = x.quota AND s.observed_at < x.ts
    GROUP BY x.quota, x.ts
),
severity_instants AS (
    SELECT i.ts, s.severity
    FROM _bf_instants AS i
    CROSS JOIN (SELECT DISTINCT severity FROM _bf_cells) AS s
    WHERE i.ts > (SELECT min(since) FROM _bf_cells)
),
-- Changes in the window before each instant: [instant - window, instant).
in_window AS (
    SELECT i.ts, c.severity,
           count(*) FILTER (WHERE c.delta = 1) AS opened,
           count(*) FILTER (WHERE c.delta = -1) AS fixed
    FROM _bf_instants AS i
    JOIN _bf_changes AS c ON c.ts < i.ts AND c.ts >= i.ts - CAST($window_seconds AS INTEGER) * INTERVAL '1 second'
    GROUP BY i.ts, c.severity
),
arrivals AS (
    SELECT x.ts, x.severity, coalesce(w.opened, 0) AS opened, coalesce(w.fixed, 0) AS fixed
    FROM severity_instants AS x
    LEFT JOIN in_window AS w ON w.ts = x.ts AND w.severity = x.severity
),
samples AS (
    SELECT 'project_score' AS source, s.project_id, CAST(NULL AS VARCHAR) AS target_id,
           CAST(NULL AS VARCHAR) AS severity, CAST(NULL AS VARCHAR) AS quota, s.ts,
           CAST(s.score AS DOUBLE PRECISION) AS value
    FROM _bf_scores_at AS s WHERE s.target_id IS NULL AND s.score IS NOT NULL
    UNION ALL
    SELECT 'target_score', s.project_id, s.target_id, NULL, NULL, s.ts, s.score
    FROM _bf_scores_at AS s WHERE s.target_id IS NOT NULL
    UNION ALL
    SELECT 'issues_open', o.project_id, NULL, o.severity, NULL, o.ts, o.open_issues
    FROM _bf_open_at AS o
    UNION ALL
    SELECT 'quota_limit', NULL, NULL, NULL, quota, ts, quota_limit FROM quotas WHERE quota_limit IS NOT NULL
    UNION ALL
    SELECT 'quota_used', NULL, NULL, NULL, quota, ts, used FROM quotas WHERE used IS NOT NULL
    UNION ALL
    SELECT 'quota_remaining', NULL, NULL, NULL, quota, ts, remaining FROM quotas WHERE remaining IS NOT NULL
    UNION ALL
    SELECT 'opened', NULL, NULL, severity, NULL, ts, opened FROM arrivals
    UNION ALL
    SELECT 'fixed', NULL, NULL, severity, NULL, ts, fixed FROM arrivals
)
SELECT
    s.source,
    (SELECT workspace FROM workspace_labels WHERE workspace_id = $workspace_id) AS workspace,
    CASE WHEN s.project_id IS NOT NULL THEN coalesce(o.team, 'unowned') END AS team,
    s.project_id,
    l.project,
    s.target_id,
    t.address,
    t.kind,
    s.severity,
    s.quota,
    epoch(s.ts) AS ts,
    s.value
FROM samples AS s
LEFT JOIN project_labels AS l ON l.project_id = s.project_id
LEFT JOIN project_owner_periods AS o
  ON o.workspace_id = $workspace_id AND o.project_id = s.project_id
 AND (o.valid_from IS NULL OR s.ts >= o.valid_from) AND (o.valid_to IS NULL OR s.ts < o.valid_to)
LEFT JOIN targets AS t ON t.id = s.target_id
ORDER BY s.source, s.ts;
