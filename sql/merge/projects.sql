-- stg_projects and stg_targets hold the whole of GET /projects (targets flattened with their project_id).
INSERT INTO projects (workspace_id, id, name, score, grade, open_issues, paused, last_scan_at,
                      first_observed_at, last_observed_at, removed_at)
SELECT getvariable('workspace_id'), id, name, score, grade, open_issues, paused, last_scan_at,
       getvariable('now'), getvariable('now'), NULL
FROM stg_projects
ON CONFLICT (id) DO UPDATE SET
    name = excluded.name, score = excluded.score, grade = excluded.grade, open_issues = excluded.open_issues,
    paused = excluded.paused, last_scan_at = excluded.last_scan_at,
    last_observed_at = excluded.last_observed_at, removed_at = NULL;

UPDATE projects SET removed_at = getvariable('now')
WHERE workspace_id = getvariable('workspace_id') AND removed_at IS NULL
  AND id NOT IN (SELECT id FROM stg_projects);

INSERT INTO targets (workspace_id, id, project_id, kind, address, verified, score, grade, last_scan_at,
                     hidden_issues, first_observed_at, last_observed_at, removed_at)
SELECT getvariable('workspace_id'), id, project_id, kind, address, verified, score, grade, last_scan_at,
       hidden_issues, getvariable('now'), getvariable('now'), NULL
FROM stg_targets
ON CONFLICT (id) DO UPDATE SET
    project_id = excluded.project_id, kind = excluded.kind, address = excluded.address,
    verified = excluded.verified, score = excluded.score, grade = excluded.grade,
    last_scan_at = excluded.last_scan_at, hidden_issues = excluded.hidden_issues,
    last_observed_at = excluded.last_observed_at, removed_at = NULL;

UPDATE targets SET removed_at = getvariable('now')
WHERE workspace_id = getvariable('workspace_id') AND removed_at IS NULL
  AND id NOT IN (SELECT id FROM stg_targets)
  AND NOT list_contains(getvariable('targets_unread'), project_id);  -- a malformed targets field proves nothing

INSERT INTO score_snapshots (workspace_id, observed_at, project_id, target_id, score, grade, open_issues, hidden_issues)
SELECT getvariable('workspace_id'), getvariable('now'), id, NULL, score, grade, open_issues, NULL FROM stg_projects
UNION ALL
SELECT getvariable('workspace_id'), getvariable('now'), project_id, id, score, grade, NULL, hidden_issues FROM stg_targets;
