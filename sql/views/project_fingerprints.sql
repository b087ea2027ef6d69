-- What a project looks like from GET /projects alone. When it has not moved since the project's lists
-- were last read, those lists need not be read again (a full reconcile aside).
-- The targets' part is a join on their aggregate, not a subquery per project: DuckDB decorrelated that
-- subquery over every workspace's projects before the reader's workspace filter (15.7 ms a read at a
-- thousand small workspaces, 5.8 ms as a join); PostgreSQL carries the filter into the aggregate's
-- grouping column, by the index that leads with the workspace.
CREATE VIEW project_fingerprints AS
WITH listed_targets AS (
    SELECT t.workspace_id, t.project_id,
           string_agg(concat_ws(',', t.id, coalesce(CAST(t.verified AS VARCHAR), '-'),
                      coalesce(CAST(t.score AS VARCHAR), '-'), coalesce(t.grade, '-'),
                      coalesce(CAST(t.last_scan_at AS VARCHAR), '-'), coalesce(CAST(t.hidden_issues AS VARCHAR), '-')),
                      ';' ORDER BY t.id) AS targets
    FROM target_states AS t
    WHERE t.listed
    GROUP BY t.workspace_id, t.project_id
)
SELECT
    p.workspace_id,
    p.id AS project_id,
    md5(concat_ws('|',
        coalesce(CAST(p.last_scan_at AS VARCHAR), '-'), coalesce(CAST(p.open_issues AS VARCHAR), '-'),
        coalesce(CAST(p.score AS VARCHAR), '-'), coalesce(p.grade, '-'), coalesce(CAST(p.paused AS VARCHAR), '-'),
        coalesce(t.targets, '-')
    )) AS fingerprint
FROM project_states AS p
LEFT JOIN listed_targets AS t ON t.workspace_id = p.workspace_id AND t.project_id = p.id
WHERE p.listed;
