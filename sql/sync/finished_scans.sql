-- Scans the history holds as finished: a project's scan list is read only down to the first of them.
SELECT s.id
FROM scans AS s
JOIN scan_statuses AS t ON t.status = s.status
WHERE t.finished AND s.workspace_id = $workspace_id;
