-- stg_projects and stg_targets hold the whole of GET /projects (targets flattened with their project_id), already
-- written to their tables by the generated upsert (sql/merge/upsert.sql). What the upsert cannot say: which
-- rows the service stopped listing, and one score snapshot per project and target.
--
-- $targets_unread: projects whose targets field was malformed; their targets stay as they were.
UPDATE projects SET removed_at = (SELECT observed_at FROM merge_context)
WHERE id IN (SELECT id FROM project_states WHERE workspace_id = (SELECT workspace_id FROM merge_context) AND listed)
  AND NOT EXISTS (SELECT 1 FROM stg_projects s WHERE s.id = projects.id);

UPDATE targets SET removed_at = (SELECT observed_at FROM merge_context)
WHERE id IN (SELECT id FROM target_states WHERE workspace_id = (SELECT workspace_id FROM merge_context) AND listed)
  AND NOT EXISTS (SELECT 1 FROM stg_targets s WHERE s.id = targets.id)
  AND NOT (project_id = ANY(CAST($targets_unread AS VARCHAR[])));  -- a malformed targets field proves nothing

INSERT INTO score_snapshots (workspace_id, observed_at, project_id, target_id, score, grade, open_issues, hidden_issues)
SELECT c.workspace_id, c.observed_at, s.id, NULL, s.score, s.grade, s.open_issues, NULL
FROM stg_projects AS s, merge_context AS c
UNION ALL
SELECT c.workspace_id, c.observed_at, s.project_id, s.id, s.score, s.grade, NULL, s.hidden_issues
FROM stg_targets AS s, merge_context AS c;
