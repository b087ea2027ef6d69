-- Project x kind x status grid of the part's scans ever seen (queued ones leave the grid cell as they finish):
-- the kinds of the contract ($scan_kinds, the scan entity's) and any other seen.
WITH kinds AS (
    SELECT unnest(CAST($scan_kinds AS VARCHAR[])) AS kind
    UNION SELECT DISTINCT kind FROM scans WHERE workspace_id = $workspace_id AND kind IS NOT NULL
),
statuses AS (
    SELECT status, finished FROM scan_statuses
    UNION SELECT DISTINCT status, false FROM scans
    WHERE workspace_id = $workspace_id AND status IS NOT NULL
      AND status NOT IN (SELECT status FROM scan_statuses)
),
counts AS (
    SELECT project_id, kind, status, count(*) AS n,
           count(*) FILTER (WHERE audit_fallback) AS audit_fallback
    FROM scans
    WHERE workspace_id = $workspace_id
      -- a queued scan that vanished is pending no more (the workspace's gone scans: not every workspace's)
      AND id NOT IN (SELECT scan_id FROM scans_gone WHERE workspace_id = $workspace_id)
    GROUP BY project_id, kind, status
)
SELECT l.workspace_id, l.team, l.project_id, l.project, k.kind, s.status, s.finished,
       coalesce(c.n, 0) AS scans,
       coalesce(c.audit_fallback, 0) AS audit_fallback
FROM project_labels AS l
CROSS JOIN kinds AS k
CROSS JOIN statuses AS s
LEFT JOIN counts AS c ON c.project_id = l.project_id AND c.kind = k.kind AND c.status = s.status
WHERE l.workspace_id = $workspace_id AND l.listed
ORDER BY l.project_id, k.kind, s.status;
