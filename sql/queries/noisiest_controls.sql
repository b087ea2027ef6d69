-- name: noisiest_controls
-- description: The 20 checks (control_id) behind the most issues ever seen in a workspace, with how many are open
--   and where.
WITH per_control AS (
    SELECT
        i.workspace_id,
        i.control_id,
        min(i.family) AS family,
        count(*) AS issues,
        count(o.id) AS open_issues,
        count(DISTINCT i.project_id) AS projects,
        count(DISTINCT i.target_id) AS targets,
        min(i.title) AS example_title
    FROM issues AS i
    LEFT JOIN open_issues_now AS o ON o.id = i.id
    GROUP BY i.workspace_id, i.control_id
)
SELECT c.control_id, w.workspace, c.family, c.issues, c.open_issues, c.projects, c.targets, c.example_title
FROM per_control AS c
LEFT JOIN workspace_labels AS w ON w.workspace_id = c.workspace_id
ORDER BY c.issues DESC, c.open_issues DESC, c.control_id, w.workspace
LIMIT 20;
