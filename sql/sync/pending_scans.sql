-- Scans still worth polling: the pending ones (`pending_scans`) whose project and target are still listed
-- (the others are settled without a request: merge/scans_gone.sql). Oldest first, at most $limit.
SELECT scan_id AS id, project_id
FROM pending_scans
WHERE ($workspace_id IS NULL OR workspace_id = $workspace_id)
  AND project_listed AND target_listed
ORDER BY created_at, scan_id
LIMIT $limit
