-- Time to fix per project over the issues fixed within the dashboard's time range (the `fix_times` sample), with
-- the project's team now: a project moved to another team brings its record along.
SELECT
    l.workspace,
    l.team,
    l.project,
    count(*) AS fixed,
    avg(f.seconds) AS mean,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY f.seconds) AS p50,
    percentile_cont(0.9) WITHIN GROUP (ORDER BY f.seconds) AS p90,
    f.project_id
FROM fix_times AS f
JOIN project_labels AS l ON l.workspace_id = f.workspace_id AND l.project_id = f.project_id
WHERE l.workspace IN ($workspace) AND l.team IN ($team) AND $__timeFilter(f.fixed_at)
GROUP BY l.workspace, l.team, l.project, f.project_id
ORDER BY mean DESC, l.workspace, l.project, f.project_id
