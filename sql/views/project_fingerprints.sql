-- What a project looks like from GET /projects alone. When it has not moved since the project's lists
-- were last read, those lists need not be read again (a full reconcile aside).
CREATE VIEW project_fingerprints AS
SELECT
    p.workspace_id,
    p.id AS project_id,
    md5(concat_ws('|',
        coalesce(CAST(p.last_scan_at AS VARCHAR), '-'), coalesce(CAST(p.open_issues AS VARCHAR), '-'),
        coalesce(CAST(p.score AS VARCHAR), '-'), coalesce(p.grade, '-'), coalesce(CAST(p.paused AS VARCHAR), '-'),
        coalesce((
            SELECT string_agg(concat_ws(',', t.id, coalesce(CAST(t.verified AS VARCHAR), '-'),
                       coalesce(CAST(t.score AS VARCHAR), '-'), coalesce(t.grade, '-'),
                       coalesce(CAST(t.last_scan_at AS VARCHAR), '-'), coalesce(CAST(t.hidden_issues AS VARCHAR), '-')),
                   ';' ORDER BY t.id)
            -- the workspace too: no index leads with a target's project, the workspace's does
            FROM target_states AS t WHERE t.workspace_id = p.workspace_id AND t.project_id = p.id AND t.listed), '-')
    )) AS fingerprint
FROM projects AS p
JOIN project_labels AS l ON l.workspace_id = p.workspace_id AND l.project_id = p.id AND l.listed;
