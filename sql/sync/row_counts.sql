-- The rows each ingestion table holds for one workspace (the still-listed and the removed alike): what an
-- asset's materialization reports as `dagster/row_count`.
SELECT
    (SELECT count(*) FROM projects WHERE workspace_id = $workspace_id) AS projects,
    (SELECT count(*) FROM targets WHERE workspace_id = $workspace_id) AS targets,
    (SELECT count(*) FROM scans WHERE workspace_id = $workspace_id) AS scans,
    (SELECT count(*) FROM issues WHERE workspace_id = $workspace_id) AS issues;
