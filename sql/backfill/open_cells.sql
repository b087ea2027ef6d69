-- Every severity for every project that ever had an issue, from its first issue on: a severity with no
-- open issue is a 0, as on /metrics, not a gap. $severities is scanwatch's list; newer ones seen are added.
DROP TABLE IF EXISTS _bf_cells;
CREATE TEMP TABLE _bf_cells AS
WITH severities AS (
    SELECT unnest(CAST($severities AS VARCHAR[])) AS severity
    UNION
    SELECT DISTINCT severity FROM _bf_changes
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
