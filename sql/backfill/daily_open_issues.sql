-- Runs of reconstructed_open_issue_runs: each instant is a midnight, standing for the day that ends there;
-- days of one cell holding the same count, one after another, are one run (islands, as in daily_scores.sql).
DROP TABLE IF EXISTS _bf_new_open;
CREATE TEMP TABLE _bf_new_open AS
WITH days AS (
    SELECT workspace_id, CAST(timezone('UTC', ts) AS DATE) - 1 AS day, project_id, severity, open_issues
    FROM _bf_open_at
),
islands AS (
    SELECT *, day - CAST(row_number() OVER (PARTITION BY project_id, severity, open_issues ORDER BY day)
                         AS INTEGER) AS island
    FROM days
)
SELECT workspace_id, min(day) AS first_day, max(day) AS last_day, project_id, severity, open_issues
FROM islands
GROUP BY workspace_id, project_id, severity, open_issues, island;
