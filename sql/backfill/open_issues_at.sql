-- Open issues per project and severity at each instant: the running count of the cell's last change
-- before it. The cell's changes and the instants asked for are put in time order (at one moment the instant
-- first: it sees the state just before it), each change starts a stretch, and an instant takes the count of
-- the stretch it falls in.
DROP VIEW IF EXISTS _bf_open_at;
CREATE TEMP VIEW _bf_open_at AS
WITH asked AS (
    SELECT c.workspace_id, c.project_id, c.severity, i.ts
    FROM _bf_instants AS i
    JOIN _bf_cells AS c ON i.ts > c.since
),
moments AS (
    SELECT CAST(NULL AS VARCHAR) AS workspace_id, project_id, severity, ts, 1 AS kind, open_issues
    FROM _bf_open_running
    UNION ALL
    SELECT workspace_id, project_id, severity, ts, 0, NULL
    FROM asked
),
stretched AS (
    SELECT *, sum(kind) OVER (PARTITION BY project_id, severity ORDER BY ts, kind
                              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS stretch
    FROM moments
),
carried AS (
    SELECT workspace_id, project_id, severity, ts, kind,
           max(open_issues) OVER (PARTITION BY project_id, severity, stretch) AS open_issues
    FROM stretched
)
SELECT workspace_id, project_id, severity, ts, coalesce(open_issues, 0) AS open_issues
FROM carried
WHERE kind = 0;
