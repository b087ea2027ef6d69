-- Scans still worth polling: queued or running (a status from a newer service is stored, not polled forever),
-- and not settled as gone (their scan, target or project answered 404, or their project or target is no
-- longer listed). Oldest first, at most $limit.
SELECT s.id, s.project_id
FROM scans s
LEFT JOIN projects p ON p.id = s.project_id
LEFT JOIN targets t ON t.id = s.target_id
JOIN scan_statuses AS k ON k.status = s.status AND NOT k.finished
WHERE true
  AND ($workspace_id IS NULL OR s.workspace_id = $workspace_id)
  AND NOT EXISTS (SELECT 1 FROM scans_gone g WHERE g.scan_id = s.id)
  AND p.removed_at IS NULL AND t.removed_at IS NULL  -- settled without a request (merge/scans_gone.sql)
ORDER BY s.created_at, s.id
LIMIT $limit
