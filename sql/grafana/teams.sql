-- The `team` variable: the teams owning a project of the chosen workspaces now (`project_labels`, from the
-- ownership map; `unowned` without one).
SELECT DISTINCT l.team
FROM project_labels AS l
WHERE l.workspace IN ($workspace) AND l.team IS NOT NULL
ORDER BY l.team
