-- Scans still pending: a status `scan_statuses` calls unfinished (queued, running; a status from a newer
-- service is stored, never polled forever), and not settled as gone (`scans_gone`: the scan answered 404, or
-- its project or target is no longer listed). `project_listed` and `target_listed` say whether GET /projects
-- still lists them (`project_states`, `target_states`; true when the history does not hold them).
-- The sync polls the listed ones (sql/sync/pending_scans.sql); the merge settles the others without a
-- request (sql/merge/scans_gone.sql).
CREATE VIEW pending_scans AS
SELECT
    s.workspace_id,
    s.id AS scan_id,
    s.project_id,
    s.target_id,
    s.created_at,
    coalesce(p.listed, true) AS project_listed,
    coalesce(t.listed, true) AS target_listed
FROM scans AS s
JOIN scan_statuses AS k ON k.status = s.status AND NOT k.finished
-- Joined on the workspace as well as the id, so a reader of one workspace reads that workspace's rows only.
LEFT JOIN project_states AS p ON p.workspace_id = s.workspace_id AND p.id = s.project_id
LEFT JOIN target_states AS t ON t.workspace_id = s.workspace_id AND t.id = s.target_id
WHERE NOT EXISTS (SELECT 1 FROM scans_gone AS g WHERE g.workspace_id = s.workspace_id AND g.scan_id = s.id);
