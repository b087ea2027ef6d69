-- Projects whose scan list may hold something new: their GET /projects state moved since the scans were
-- last read ($all forces every project).
SELECT f.project_id, f.fingerprint
FROM project_fingerprints f
LEFT JOIN project_sync_state s USING (project_id)
WHERE f.workspace_id = $workspace_id
  AND ($all OR s.scans_fingerprint IS DISTINCT FROM f.fingerprint)
ORDER BY f.project_id;
