-- Open issues per project and severity right after each change: one row per distinct change time.
DROP TABLE IF EXISTS _bf_open_running;
CREATE TEMP TABLE _bf_open_running AS
SELECT
    project_id,
    severity,
    ts,
    CAST(sum(sum(delta)) OVER (PARTITION BY project_id, severity ORDER BY ts) AS INTEGER) AS open_issues
FROM _bf_changes
GROUP BY project_id, severity, ts;
