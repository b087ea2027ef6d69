-- Queued scans that answered 404 this run ($scan_ids with their $project_ids): settled, never polled again.
INSERT INTO scans_gone (workspace_id, scan_id, project_id, gone_at, answered)
SELECT c.workspace_id, u.scan_id, u.project_id, c.observed_at, 'scan'
FROM (SELECT unnest(CAST($scan_ids AS VARCHAR[])) AS scan_id, unnest(CAST($project_ids AS VARCHAR[])) AS project_id) AS u,
     merge_context AS c
ON CONFLICT (scan_id) DO NOTHING;

-- Queued scans of a project or target GET /projects no longer lists are settled without a request: the service
-- would answer 404 for them (workspace isolation answers a missing object and a foreign one alike). Their
-- scans rows stay as last seen; nothing polls them again.
INSERT INTO scans_gone (workspace_id, scan_id, project_id, gone_at, answered)
SELECT s.workspace_id, s.scan_id, s.project_id, c.observed_at,
       CASE WHEN s.project_listed THEN 'target' ELSE 'project' END
FROM pending_scans AS s
CROSS JOIN merge_context AS c
WHERE s.workspace_id = (SELECT workspace_id FROM merge_context)  -- a value, which the indexes can look up
  AND NOT (s.project_listed AND s.target_listed);

-- What this sync settled, the count the merge reports.
SELECT count(*) FROM scans_gone
WHERE workspace_id = (SELECT workspace_id FROM merge_context) AND gone_at = (SELECT observed_at FROM merge_context);
