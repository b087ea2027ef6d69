-- name: noisiest_controls
-- description: The 20 checks (control_id) behind the most issues ever seen in a workspace, with how many are open
--   and where.
--
-- Counted per target first, then per check: the distinct projects and targets of a check are then counted
-- over a few thousand rows rather than every issue sorted by its check (3 s of 4.4 on PostgreSQL at 390k
-- issues, where text sorts by the database's collation).
WITH per_target AS (
    SELECT
        i.workspace_id,
        i.control_id,
        i.project_id,
        i.target_id,
        min(i.family) AS family,
        count(*) AS issues,
        count(o.id) AS open_issues,
        min(i.title) AS example_title
    FROM issues AS i
    LEFT JOIN open_issues_now AS o ON o.id = i.id
    GROUP BY i.workspace_id, i.control_id, i.project_id, i.target_id
), per_control AS (
    SELECT
        workspace_id,
        control_id,
        min(family) AS family,
        sum(issues) AS issues,
        sum(open_issues) AS open_issues,
        count(DISTINCT project_id) AS projects,
        count(*) AS targets,
        min(example_title) AS example_title
    FROM per_target
    GROUP BY workspace_id, control_id
)
SELECT c.control_id, w.workspace, c.family, CAST(c.issues AS BIGINT) AS issues,
       CAST(c.open_issues AS BIGINT) AS open_issues, c.projects, c.targets, c.example_title
FROM per_control AS c
LEFT JOIN workspace_labels AS w ON w.workspace_id = c.workspace_id
ORDER BY c.issues DESC, c.open_issues DESC, c.control_id, w.workspace
LIMIT 20;
