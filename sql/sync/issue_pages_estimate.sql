-- Expected issue pages for the projects about to be read: what the history already holds for each, or its
-- open count on a first read (a floor: fixed and marked issues are listed too), one page at least.
SELECT coalesce(sum(greatest(1, CAST(ceil(CAST(greatest(coalesce(h.n, 0), coalesce(p.open_issues, 0))
                                                AS DOUBLE PRECISION) / $page_size) AS INTEGER))), 0) AS pages,
       coalesce(bool_or(h.n IS NULL), false) AS first_read
FROM projects p
LEFT JOIN (SELECT project_id, count(*) AS n FROM issues
           WHERE workspace_id = $workspace_id AND project_id = ANY(CAST($project_ids AS VARCHAR[]))
           GROUP BY project_id) h ON h.project_id = p.id  -- those projects' issues alone, not every workspace's
WHERE p.workspace_id = $workspace_id AND p.id = ANY(CAST($project_ids AS VARCHAR[]));
