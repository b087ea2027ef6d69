-- name: project_owners
-- description: Every project's periods of ownership from the ownership map: team, SLA profile, the rule that gave
--   them and since when; the current period has no end.
SELECT
    l.workspace,
    o.team,
    l.project,
    o.sla_profile,
    CASE WHEN o.rule IS NULL THEN 'default team' ELSE 'rules[' || CAST(o.rule AS VARCHAR) || ']' END AS claimed_by,
    o.valid_from,
    o.valid_to,
    l.listed,
    o.project_id
FROM project_owners AS o
LEFT JOIN project_labels AS l ON l.workspace_id = o.workspace_id AND l.project_id = o.project_id
ORDER BY l.workspace, l.project, o.project_id, o.valid_from;
