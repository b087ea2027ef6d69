-- Project x kind x status grid of scans ever seen (queued ones leave the grid cell as they finish).
WITH kinds AS (
    SELECT * FROM (VALUES ('quick'), ('audit'), ('repository')) v(kind)
    UNION SELECT DISTINCT kind FROM scans WHERE kind IS NOT NULL
),
statuses AS (
    SELECT status, finished FROM scan_statuses
    UNION SELECT DISTINCT status, false FROM scans
    WHERE status IS NOT NULL AND status NOT IN (SELECT status FROM scan_statuses)
),
counts AS (
    SELECT project_id, kind, status, count(*) AS n,
           count(*) FILTER (WHERE audit_fallback) AS audit_fallback
    FROM scans
    WHERE id NOT IN (SELECT scan_id FROM scans_gone)  -- a queued scan that vanished is pending no more
    GROUP BY ALL
)
SELECT p.workspace_id, p.id AS project_id, coalesce(p.name, p.id) AS project, k.kind, s.status, s.finished,
       coalesce(c.n, 0) AS scans,
       coalesce(c.audit_fallback, 0) AS audit_fallback
FROM projects p
CROSS JOIN kinds k
CROSS JOIN statuses s
LEFT JOIN counts c ON c.project_id = p.id AND c.kind = k.kind AND c.status = s.status
WHERE p.removed_at IS NULL
ORDER BY p.workspace_id, p.id, k.kind, s.status
