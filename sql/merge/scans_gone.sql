-- Queued scans of a project or target GET /projects no longer lists are settled without a request: the service
-- would answer 404 for them (workspace isolation answers a missing object and a foreign one alike). Their
-- scans rows stay as last seen; nothing polls them again.
INSERT INTO scans_gone (workspace_id, scan_id, project_id, gone_at, answered)
SELECT s.workspace_id, s.id, s.project_id, getvariable('now'),
       CASE WHEN p.removed_at IS NOT NULL THEN 'project' ELSE 'target' END
FROM scans s
LEFT JOIN projects p ON p.id = s.project_id
LEFT JOIN targets t ON t.id = s.target_id
JOIN scan_statuses AS k ON k.status = s.status AND NOT k.finished
WHERE s.workspace_id = getvariable('workspace_id')
  AND (p.removed_at IS NOT NULL OR t.removed_at IS NOT NULL)
  AND s.id NOT IN (SELECT scan_id FROM scans_gone);
