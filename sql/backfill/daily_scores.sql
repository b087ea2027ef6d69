-- Rows of reconstructed_scores: each instant is a midnight, standing for the day that ends there.
DROP TABLE IF EXISTS _bf_new_scores;
CREATE TEMP TABLE _bf_new_scores AS
SELECT
    CAST($workspace_id AS VARCHAR) AS workspace_id,
    CAST(timezone('UTC', ts) AS DATE) - 1 AS day,
    project_id,
    target_id,
    score,
    grade,
    scan_id
FROM _bf_scores_at;
