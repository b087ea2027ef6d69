-- Rows of reconstructed_open_issues: each instant is a midnight, standing for the day that ends there.
DROP TABLE IF EXISTS _bf_new_open;
CREATE TEMP TABLE _bf_new_open AS
SELECT
    workspace_id,
    CAST(timezone('UTC', ts) AS DATE) - 1 AS day,
    project_id,
    severity,
    open_issues
FROM _bf_open_at;
