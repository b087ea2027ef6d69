-- stg_issues: the complete issue lists of some projects read this run, less the rows unchanged since the last
-- read (sql/merge/unchanged.sql). Events compare the staged state with the history before the generated
-- upsert (sql/merge/upsert.sql) overwrites it, in the same transaction.
INSERT INTO issue_events (workspace_id, issue_id, project_id, target_id, severity, observed_at, event, from_value, to_value)
WITH d AS (
    SELECT s.*, i.id IS NULL AS is_new, i.status AS old_status, i.severity AS old_severity,
           i.fixed_at AS old_fixed_at, coalesce(m.left_as, 'status_changed') AS left_as,
           -- Fixed on both sides but found fixed again later: it regressed and was fixed between two syncs.
           coalesce(m.reaching_fixes AND s.status = i.status AND s.fixed_at > i.fixed_at,
                    false) AS refixed
    FROM stg_issues s LEFT JOIN issues i ON i.id = s.id
    -- What leaving the stored status means, and the event that records it, are `status_moves`' (the view says
    -- why leaving `fixed` is a regression, recorded as `reopened`).
    LEFT JOIN status_moves AS m ON m.status = i.status
), e AS (
    SELECT d.*, 'opened' AS event, NULL AS from_value, status AS to_value FROM d WHERE is_new
    UNION ALL
    SELECT d.*, left_as, old_status, CASE WHEN refixed THEN 'open' ELSE status END FROM d
    WHERE NOT is_new AND (old_status IS DISTINCT FROM status OR refixed)
    UNION ALL
    SELECT d.*, 'status_changed', 'open', status FROM d WHERE refixed
    UNION ALL
    SELECT d.*, 'severity_changed', old_severity, severity FROM d
    WHERE NOT is_new AND old_severity IS DISTINCT FROM severity
)
SELECT c.workspace_id, e.id, e.project_id, e.target_id, e.severity, c.observed_at, e.event, e.from_value, e.to_value
FROM e, merge_context AS c;
