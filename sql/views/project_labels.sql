-- What a project is called beside its id (its name, else its id), with its workspace's label, and whether the
-- service still lists it: a removed project leaves every series and count of the present, never its past.
CREATE VIEW project_labels AS
SELECT
    p.workspace_id,
    w.workspace,
    p.id AS project_id,
    coalesce(p.name, p.id) AS project,
    p.removed_at IS NULL AS listed
FROM projects AS p
LEFT JOIN workspace_labels AS w ON w.workspace_id = p.workspace_id;
