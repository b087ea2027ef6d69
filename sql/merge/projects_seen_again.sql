-- GET /projects answered what the last full merge read, into rows nothing changed since
-- (merged_list_check.sql): the workspace's listed projects and targets are exactly the answer's, none to
-- mark removed or to revive. They are marked seen, and each gets this sync's score sample from the values
-- that merge wrote, as the generated upsert and merge/projects.sql would have written them.
UPDATE projects SET last_observed_at = (SELECT observed_at FROM merge_context)
WHERE id IN (SELECT id FROM project_states WHERE workspace_id = (SELECT workspace_id FROM merge_context) AND listed);

UPDATE targets SET last_observed_at = (SELECT observed_at FROM merge_context)
WHERE id IN (SELECT id FROM target_states WHERE workspace_id = (SELECT workspace_id FROM merge_context) AND listed);

INSERT INTO score_snapshots (workspace_id, observed_at, project_id, target_id, score, grade, open_issues, hidden_issues)
SELECT c.workspace_id, c.observed_at, p.id, NULL, p.score, p.grade, p.open_issues, NULL
FROM project_states AS p, merge_context AS c
WHERE p.workspace_id = c.workspace_id AND p.listed
UNION ALL
SELECT c.workspace_id, c.observed_at, t.project_id, t.id, t.score, t.grade, NULL, t.hidden_issues
FROM target_states AS t, merge_context AS c
WHERE t.workspace_id = c.workspace_id AND t.listed;
