-- Project x family grid of the part's open issues (`open_issues_now`): the families of the contract
-- ($families, the issue entity's), and those a newer service adds as they are seen.
WITH families AS (
    SELECT unnest(CAST($families AS VARCHAR[])) AS family
    UNION SELECT DISTINCT family FROM issues WHERE workspace_id = $workspace_id AND family IS NOT NULL
),
counts AS (
    SELECT project_id, family, count(*) AS n
    FROM open_issues_now
    WHERE workspace_id = $workspace_id
    GROUP BY project_id, family
)
SELECT l.workspace_id, l.team, l.project_id, l.project, f.family, coalesce(c.n, 0) AS open
FROM project_labels AS l
CROSS JOIN families AS f
LEFT JOIN counts AS c ON c.project_id = l.project_id AND c.family = f.family
WHERE l.workspace_id = $workspace_id AND l.listed
ORDER BY l.project_id, f.family;
