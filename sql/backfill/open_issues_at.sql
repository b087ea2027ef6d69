-- Open issues per project and severity at each instant: the running count of the cell's last change
-- before it.
CREATE OR REPLACE TEMP VIEW _bf_open_at AS
SELECT x.workspace_id, x.project_id, x.severity, x.ts, coalesce(r.open_issues, 0) AS open_issues
FROM (
    SELECT c.workspace_id, c.project_id, c.severity, i.ts
    FROM _bf_instants AS i
    JOIN _bf_cells AS c ON i.ts > c.since
) AS x
ASOF LEFT JOIN _bf_open_running AS r
    ON r.project_id = x.project_id AND r.severity = x.severity AND x.ts > r.ts;
