-- Every run of the pipeline (sync_runs) with the workspace it was for. A run recorded before its workspace's
-- id was known (a refused key on a first sync) carries only the followed name, and belongs to the workspace
-- that name is bound to since; `workspace` is that workspace's label (`workspace_labels`), or the followed
-- name while the workspace has never been read.
-- Two halves, so a reader of one workspace's runs reads only those: the runs that carry its id, and the few
-- recorded before any id was known.
CREATE VIEW workspace_runs AS
WITH resolved AS (
    SELECT r.workspace_id, r.workspace_label, r.run_id, r.asset, r.started_at, r.finished_at, r.status, r.requests,
           r.retries, r.rate_limited, r.rate_limit_remaining, r.rows_written, r.service_version, r.error
    FROM sync_runs AS r
    WHERE r.workspace_id IS NOT NULL
    UNION ALL
    SELECT b.workspace_id, r.workspace_label, r.run_id, r.asset, r.started_at, r.finished_at, r.status, r.requests,
           r.retries, r.rate_limited, r.rate_limit_remaining, r.rows_written, r.service_version, r.error
    FROM sync_runs AS r
    LEFT JOIN accounts AS b ON b.workspace_label = r.workspace_label
    WHERE r.workspace_id IS NULL
)
SELECT
    r.workspace_id,
    coalesce(w.workspace, r.workspace_label) AS workspace,
    r.workspace_label,
    r.run_id,
    r.asset,
    r.started_at,
    r.finished_at,
    r.status,
    r.requests,
    r.retries,
    r.rate_limited,
    r.rate_limit_remaining,
    r.rows_written,
    r.service_version,
    r.error
FROM resolved AS r
LEFT JOIN workspace_labels AS w ON w.workspace_id = r.workspace_id;
