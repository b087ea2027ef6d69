-- Every severity for every project that ever had an issue, from its first issue on: a severity with no
-- open issue is a 0, as on /metrics, not a gap: the workspace's `severity_grid` (the vocabulary's, then any
-- other its issues carried).
DROP TABLE IF EXISTS _bf_cells;
CREATE TEMP TABLE _bf_cells AS
WITH severities AS (
    SELECT severity FROM severity_grid WHERE workspace_id = $workspace_id
),
-- Each project's first change, found once: not once per severity.
firsts AS (
    SELECT workspace_id, project_id, min(ts) AS since
    FROM _bf_changes
    GROUP BY workspace_id, project_id
)
SELECT f.workspace_id, f.project_id, s.severity, f.since
FROM firsts AS f
CROSS JOIN severities AS s;
