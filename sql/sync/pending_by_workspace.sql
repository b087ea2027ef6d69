-- What the scan sensor reads at each tick, for every followed workspace at once ($labels: their names, '' for
-- the one workspace of the two variables), in one statement however many workspaces are followed:
--   'known'  each of them the history has read (the others have no history yet);
--   'scan'   its scans still worth polling: `pending_scans` whose project and target are still listed (the
--            others are settled without a request: merge/scans_gone.sql), oldest first, at most $limit;
--   'behind' for the workspaces no run is refreshing ($idle), the projects whose scans a run read after their
--            last move while their issues were read before it (or never): a scans run settled a finished scan
--            before the sensor saw it finish. Compared by fingerprints (what GET /projects showed), not by
--            clocks: the service stamps its scans, scanwatch its reads.
WITH named AS (
    SELECT coalesce(label, '') AS label, workspace_id
    FROM followed_workspaces
    WHERE coalesce(label, '') = ANY(CAST($labels AS VARCHAR[]))
), pending AS (
    SELECT n.label, s.scan_id, s.project_id,
           row_number() OVER (PARTITION BY n.label ORDER BY s.created_at, s.scan_id) AS turn
    FROM named AS n
    JOIN pending_scans AS s ON s.workspace_id = n.workspace_id
    WHERE s.project_listed AND s.target_listed
)
SELECT 'known' AS kind, label, workspace_id AS first, CAST(NULL AS VARCHAR) AS second, CAST(0 AS BIGINT) AS turn
FROM named
UNION ALL
SELECT 'scan', label, scan_id, project_id, turn
FROM pending
WHERE turn <= $limit
UNION ALL
SELECT 'behind', n.label, f.project_id, f.fingerprint, CAST(0 AS BIGINT)
FROM named AS n
JOIN project_fingerprints AS f ON f.workspace_id = n.workspace_id
JOIN project_sync_state AS s ON s.workspace_id = f.workspace_id AND s.project_id = f.project_id
WHERE n.label = ANY(CAST($idle AS VARCHAR[]))
  AND s.scans_fingerprint = f.fingerprint
  AND s.issues_fingerprint IS DISTINCT FROM f.fingerprint
ORDER BY kind, label, turn, first;
