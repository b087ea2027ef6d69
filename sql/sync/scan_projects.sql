-- Projects whose scan list may hold something new: their GET /projects state moved since the scans were
-- last read ($all forces every project), or their list was last read before $peek_before. The contract does
-- not promise that a failed scan moves last_scan_at, a score or a count, so a project that looks still has
-- its newest scan page read once per scans-schedule interval anyway: one request, bounded by the projects.
-- $only, when not empty, keeps the projects named (the scan-finished sensor's runs).
SELECT f.project_id, f.fingerprint, s.scans_fingerprint IS NOT DISTINCT FROM f.fingerprint AS peek
FROM project_fingerprints f
LEFT JOIN project_sync_state s USING (project_id)
WHERE f.workspace_id = $workspace_id
  AND ($all OR s.scans_fingerprint IS DISTINCT FROM f.fingerprint
            OR s.scans_synced_at IS NULL OR s.scans_synced_at <= CAST($peek_before AS TIMESTAMPTZ))
  AND (cardinality(CAST($only AS VARCHAR[])) = 0 OR f.project_id = ANY(CAST($only AS VARCHAR[])))
ORDER BY f.project_id;
