-- Project x family grid of open issues (families a newer service adds appear as they are seen).
WITH families AS (
    SELECT * FROM (VALUES ('database'), ('secrets'), ('exposedFiles'), ('personalData'), ('vulnerableVersions'),
                          ('configuration'), ('compliance'), ('server'), ('code')) v(family)
    UNION SELECT DISTINCT family FROM issues WHERE family IS NOT NULL
),
counts AS (
    SELECT project_id, family, count(*) AS n FROM issues WHERE status = 'open' AND hidden_reason IS NULL GROUP BY ALL
)
SELECT p.workspace_id, p.id AS project_id, coalesce(p.name, p.id) AS project, f.family, coalesce(c.n, 0) AS open
FROM projects p
CROSS JOIN families f
LEFT JOIN counts c ON c.project_id = p.id AND c.family = f.family
WHERE p.removed_at IS NULL
ORDER BY p.workspace_id, p.id, f.family
