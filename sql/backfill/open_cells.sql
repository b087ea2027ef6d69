-- Every severity for every project that ever had an issue, from its first issue on: a severity with no
-- open issue is a 0, as on /metrics, not a gap. $severities is scanwatch's list; newer ones seen are added.
DROP TABLE IF EXISTS _bf_cells;
CREATE TEMP TABLE _bf_cells AS
WITH severities AS (
    SELECT unnest(CAST($severities AS VARCHAR[])) AS severity
    UNION
    SELECT DISTINCT severity FROM _bf_changes
)
SELECT c.workspace_id, c.project_id, s.severity, min(c.ts) AS since
FROM _bf_changes AS c
CROSS JOIN severities AS s
GROUP BY c.workspace_id, c.project_id, s.severity;
