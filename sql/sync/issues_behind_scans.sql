-- Projects whose scans a run read after their last move, while their issues were read before it (or never):
-- a scans run settled a finished scan before the scan-finished sensor saw it finish, so the project's new
-- issues wait for the next refresh. Compared by fingerprints (what GET /projects showed), not by clocks: the
-- service stamps its scans, scanwatch its reads.
SELECT f.project_id, f.fingerprint
FROM project_fingerprints AS f
JOIN project_sync_state AS s USING (project_id)
WHERE f.workspace_id = $workspace_id
  AND s.scans_fingerprint = f.fingerprint
  AND s.issues_fingerprint IS DISTINCT FROM f.fingerprint
ORDER BY f.project_id
