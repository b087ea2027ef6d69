-- Projects whose issue lists must be read: asked for by name ($only), or else moved since their issues were
-- last read, or due for a full reconcile (marks and rechecks that leave the project's counts unchanged):
-- none since $reconcile_before.
WITH p AS (
    SELECT f.project_id, f.fingerprint, s.issues_fingerprint,
           ($full OR s.full_reconcile_at IS NULL
                  OR s.full_reconcile_at < CAST($reconcile_before AS TIMESTAMPTZ)) AS full_reconcile
    FROM project_fingerprints f
    LEFT JOIN project_sync_state s USING (project_id)
    WHERE f.workspace_id = $workspace_id
)
SELECT project_id, fingerprint, full_reconcile
FROM p
WHERE CASE WHEN cardinality(CAST($only AS VARCHAR[])) > 0 THEN project_id = ANY(CAST($only AS VARCHAR[]))
           ELSE full_reconcile OR issues_fingerprint IS DISTINCT FROM fingerprint END
ORDER BY project_id;
