-- Rows of reconstructed_open_issues: each instant is a midnight, standing for the day that ends there.
SELECT
    workspace_id,
    CAST(timezone('UTC', ts) AS DATE) - 1 AS day,
    project_id,
    severity,
    open_issues
FROM _bf_open_at
