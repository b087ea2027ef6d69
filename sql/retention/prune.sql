-- `scanwatch prune --before $before`: thin the samples every sync appends, before that instant, to what the
-- day-level history needs; nothing the metrics, the alerts or a cookbook query reads changes.
--
-- score_snapshots: per workspace, project, target and UTC day, the last sample (the day's score, grade and
--   open issues: `score_days` takes arg_max by time), the first sample holding the day's lowest score and the
--   first holding its highest (`min_score`, `max_score`); and each workspace's first sample
--   (`first_observations`). `score_days`, the score history queries and the backfill read the same days after.
-- quota_snapshots: per workspace, quota and UTC day, the last sample; the latest of all, which `/metrics` and
--   `quota_burn` read, is the last of its day.
-- ingest_warnings: dropped before the instant (what a sync met then; no metric reads them).
-- Never touched: accounts, projects, targets, scans, issues, issue_events, sync_runs (the pipeline's
-- counters count them), scans_gone, project_sync_state, reconstructed days, the snapshot.
CREATE TEMP TABLE prune_counts AS
SELECT 'score_snapshots' AS name, count(*) AS before_rows FROM score_snapshots
UNION ALL SELECT 'quota_snapshots', count(*) FROM quota_snapshots
UNION ALL SELECT 'ingest_warnings', count(*) FROM ingest_warnings;

CREATE TEMP TABLE prune_scores_kept AS
SELECT workspace_id, observed_at, project_id, target_id, score, grade, open_issues, hidden_issues
FROM (
    SELECT
        s.*,
        row_number() OVER (PARTITION BY s.workspace_id, s.project_id, s.target_id,
                                        CAST(timezone('UTC', s.observed_at) AS DATE)
                           ORDER BY s.observed_at DESC) AS last_n,
        row_number() OVER (PARTITION BY s.workspace_id, s.project_id, s.target_id,
                                        CAST(timezone('UTC', s.observed_at) AS DATE)
                           ORDER BY s.score ASC NULLS LAST, s.observed_at) AS low_n,
        row_number() OVER (PARTITION BY s.workspace_id, s.project_id, s.target_id,
                                        CAST(timezone('UTC', s.observed_at) AS DATE)
                           ORDER BY s.score DESC NULLS LAST, s.observed_at) AS high_n,
        -- The first instant holds a sample of every project and target: one of them, always the same one,
        -- so that a second prune keeps what the first kept.
        row_number() OVER (PARTITION BY s.workspace_id
                           ORDER BY s.observed_at, s.project_id, s.target_id NULLS FIRST) AS first_n
    FROM score_snapshots AS s
    WHERE s.observed_at < $before
) AS ranked
WHERE last_n = 1 OR low_n = 1 OR high_n = 1 OR first_n = 1;

DELETE FROM score_snapshots WHERE observed_at < $before;

INSERT INTO score_snapshots (workspace_id, observed_at, project_id, target_id, score, grade, open_issues,
                             hidden_issues)
SELECT workspace_id, observed_at, project_id, target_id, score, grade, open_issues, hidden_issues
FROM prune_scores_kept;

DELETE FROM quota_snapshots AS q
WHERE q.observed_at < $before
  AND q.observed_at < (SELECT max(o.observed_at) FROM quota_snapshots AS o
                       WHERE o.workspace_id = q.workspace_id AND o.quota = q.quota
                         AND CAST(timezone('UTC', o.observed_at) AS DATE)
                             = CAST(timezone('UTC', q.observed_at) AS DATE));

DELETE FROM ingest_warnings WHERE observed_at < $before;

SELECT c.name, c.before_rows - CASE c.name
    WHEN 'score_snapshots' THEN (SELECT count(*) FROM score_snapshots)
    WHEN 'quota_snapshots' THEN (SELECT count(*) FROM quota_snapshots)
    ELSE (SELECT count(*) FROM ingest_warnings) END AS dropped
FROM prune_counts AS c
ORDER BY c.name;
