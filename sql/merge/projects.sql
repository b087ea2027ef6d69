-- stg_projects and stg_targets hold the whole of GET /projects (targets flattened with their project_id), already
-- written to their tables by the generated upsert (sql/merge/upsert.sql). What the upsert cannot say: which
-- rows the service stopped listing, and one score snapshot per project and target.
--
-- $targets_unread: projects whose targets field was malformed; their targets stay as they were.
SET VARIABLE targets_unread = CAST($targets_unread AS VARCHAR[]);

UPDATE projects SET removed_at = getvariable('now')
WHERE workspace_id = getvariable('workspace_id') AND removed_at IS NULL
  AND id NOT IN (SELECT id FROM stg_projects);

UPDATE targets SET removed_at = getvariable('now')
WHERE workspace_id = getvariable('workspace_id') AND removed_at IS NULL
  AND id NOT IN (SELECT id FROM stg_targets)
  AND NOT list_contains(getvariable('targets_unread'), project_id);  -- a malformed targets field proves nothing

INSERT INTO score_snapshots (workspace_id, observed_at, project_id, target_id, score, grade, open_issues, hidden_issues)
SELECT getvariable('workspace_id'), getvariable('now'), id, NULL, score, grade, open_issues, NULL FROM stg_projects
UNION ALL
SELECT getvariable('workspace_id'), getvariable('now'), project_id, id, score, grade, NULL, hidden_issues FROM stg_targets;
