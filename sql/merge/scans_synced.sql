-- Projects whose scan pages were read this run, with the fingerprint of what moved.
INSERT INTO project_sync_state (workspace_id, project_id, scans_fingerprint, scans_synced_at)
SELECT $workspace_id, u.project_id, u.fingerprint, CAST($now AS TIMESTAMPTZ)
FROM (SELECT unnest(CAST($project_ids AS VARCHAR[])) AS project_id,
             unnest(CAST($fingerprints AS VARCHAR[])) AS fingerprint) AS u
ON CONFLICT (project_id) DO UPDATE SET
    scans_fingerprint = excluded.scans_fingerprint, scans_synced_at = excluded.scans_synced_at;
