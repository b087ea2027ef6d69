-- How long each list of a project can honestly be, from the service's own counts and the history: a list
-- that runs far past this (pipelines/api/bounds.py) is a service paging without end, not a big project.
-- Scans: the history's plus one an hour per target for the plan's year of scan history.
WITH known_issues AS (
    SELECT project_id, count(*) AS n FROM issues WHERE workspace_id = $workspace_id GROUP BY project_id
), known_scans AS (
    SELECT project_id, count(*) AS n FROM scans WHERE workspace_id = $workspace_id GROUP BY project_id
), live_targets AS (
    SELECT project_id, count(*) AS n FROM target_states
    WHERE workspace_id = $workspace_id AND listed GROUP BY project_id
)
SELECT p.id AS project_id,
       greatest(coalesce(p.open_issues, 0), coalesce(ki.n, 0)) AS issues,
       coalesce(ks.n, 0) + 24 * 366 * greatest(coalesce(lt.n, 0), 1) AS scans
FROM projects p
LEFT JOIN known_issues ki ON ki.project_id = p.id
LEFT JOIN known_scans ks ON ks.project_id = p.id
LEFT JOIN live_targets lt ON lt.project_id = p.id
WHERE p.workspace_id = $workspace_id;
