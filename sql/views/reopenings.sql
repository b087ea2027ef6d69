-- Regressions: every time an issue came back after a fix, one row per issue and moment, with what the issue
-- is now. What counts as coming back is `status_moves`' (leaving `fixed`, whichever event recorded it), read
-- through `issue_transitions`. The cookbook's `regressions` and the history dashboard's regressions read it.
CREATE VIEW reopenings AS
WITH moments AS (
    SELECT DISTINCT workspace_id, issue_id, observed_at
    FROM issue_transitions
    WHERE regression
)
SELECT
    m.workspace_id,
    m.issue_id,
    i.project_id,
    m.observed_at AS reopened_at,
    i.severity,
    i.status,
    i.title,
    i.address,
    i.location,
    i.control_id
FROM moments AS m
-- Joined on the workspace too, so a reader of one workspace reads that workspace's issues only.
JOIN issues AS i ON i.workspace_id = m.workspace_id AND i.id = m.issue_id;
