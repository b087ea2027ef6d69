-- Runs of reconstructed_score_runs: each instant is a midnight, standing for the day that ends there; days of
-- one target (or project) holding the same values, one after another, are one run. Each day minus its number
-- among the days of equal values is the same for consecutive days (an island).
DROP TABLE IF EXISTS _bf_new_scores;
CREATE TEMP TABLE _bf_new_scores AS
WITH days AS (
    SELECT CAST(timezone('UTC', ts) AS DATE) - 1 AS day, project_id, target_id, score, grade, scan_id
    FROM _bf_scores_at
),
islands AS (
    SELECT *, day - CAST(row_number() OVER (PARTITION BY project_id, target_id, score, grade, scan_id
                                            ORDER BY day) AS INTEGER) AS island
    FROM days
)
SELECT
    CAST($workspace_id AS VARCHAR) AS workspace_id,
    min(day) AS first_day,
    max(day) AS last_day,
    project_id,
    target_id,
    score,
    grade,
    scan_id
FROM islands
GROUP BY project_id, target_id, score, grade, scan_id, island;
