-- The workspace's pending scans (`pending_scans`), oldest first, at most $limit. `listed`: its project and
-- target are still listed, so it is worth polling; the others are settled without a request
-- (merge/scans_gone.sql), and a sync that finds none of them and nothing else to merge skips the merge.
SELECT scan_id AS id, project_id, project_listed AND target_listed AS listed
FROM pending_scans
WHERE ($workspace_id IS NULL OR workspace_id = $workspace_id)
ORDER BY created_at, scan_id
LIMIT $limit
