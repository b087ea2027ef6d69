-- Every project with whether GET /projects still lists it (the merge marks `removed_at` when it stops; a
-- project listed again is revived): a removed project leaves every series and count of the present, never
-- its past. The project's own row, for the readers that need no label (the merges, the sync's bounds);
-- `project_labels` adds what a project is called, its workspace's label and its team.
CREATE VIEW project_states AS
SELECT
    p.*,
    p.removed_at IS NULL AS listed
FROM projects AS p;
