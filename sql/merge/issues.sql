-- stg_issues: the complete issue lists of some projects read this run, less the rows unchanged since the last
-- read (sql/merge/unchanged.sql). Events compare the staged state with the history before the generated
-- upsert (sql/merge/upsert.sql) overwrites it, in the same transaction.
INSERT INTO issue_events (workspace_id, issue_id, project_id, target_id, severity, observed_at, event, from_value, to_value)
WITH d AS (
    SELECT s.*, i.id IS NULL AS is_new, i.status AS old_status, i.severity AS old_severity,
           i.fixed_at AS old_fixed_at,
           -- Fixed on both sides but found fixed again later: it regressed and was fixed between two syncs.
           (i.status = 'fixed' AND s.status = 'fixed' AND s.fixed_at > i.fixed_at) AS refixed
    FROM stg_issues s LEFT JOIN issues i ON i.id = s.id
), e AS (
    SELECT d.*, 'opened' AS event, NULL AS from_value, status AS to_value FROM d WHERE is_new
    UNION ALL
    SELECT d.*, 'reopened', 'fixed', CASE WHEN refixed THEN 'open' ELSE status END FROM d
    WHERE NOT is_new AND old_status = 'fixed' AND (status IS DISTINCT FROM 'fixed' OR refixed)
    UNION ALL
    SELECT d.*, 'status_changed', CASE WHEN refixed THEN 'open' ELSE old_status END, status FROM d
    WHERE NOT is_new AND ((old_status IS DISTINCT FROM status AND old_status IS DISTINCT FROM 'fixed') OR refixed)
    UNION ALL
    SELECT d.*, 'severity_changed', old_severity, severity FROM d
    WHERE NOT is_new AND old_severity IS DISTINCT FROM severity
)
SELECT c.workspace_id, e.id, e.project_id, e.target_id, e.severity, c.observed_at, e.event, e.from_value, e.to_value
FROM e, merge_context AS c;
