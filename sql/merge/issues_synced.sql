-- Projects whose issue lists this merge holds, marked as read in the same transaction as their issues:
-- the fingerprint of what moved, and when a full reconcile last read them.
INSERT INTO project_sync_state (workspace_id, project_id, issues_fingerprint, issues_synced_at, full_reconcile_at)
SELECT c.workspace_id, u.project_id, u.fingerprint, c.observed_at,
       CASE WHEN u.full_reconcile THEN c.observed_at END
FROM (SELECT unnest(CAST($project_ids AS VARCHAR[])) AS project_id,
             unnest(CAST($fingerprints AS VARCHAR[])) AS fingerprint,
             unnest(CAST($full_reconciles AS BOOLEAN[])) AS full_reconcile) AS u,
     merge_context AS c
ON CONFLICT (project_id) DO UPDATE SET
    issues_fingerprint = excluded.issues_fingerprint,
    issues_synced_at = excluded.issues_synced_at,
    full_reconcile_at = coalesce(excluded.full_reconcile_at, project_sync_state.full_reconcile_at);
