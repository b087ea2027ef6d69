-- What a project is called beside its id (its name, else its id), with its workspace's label, its team now
-- (`project_owners_now`), and whether the service still lists it (`project_states`).
CREATE VIEW project_labels AS
SELECT
    p.workspace_id,
    w.workspace,
    p.id AS project_id,
    coalesce(p.name, p.id) AS project,
    p.listed,
    o.team
FROM project_states AS p
LEFT JOIN workspace_labels AS w ON w.workspace_id = p.workspace_id
LEFT JOIN project_owners_now AS o ON o.workspace_id = p.workspace_id AND o.project_id = p.id;
