-- The severity each issue was first seen with: that of its `opened` event, else (a history that holds no
-- opened event for it) the value its first severity change started from, else its severity now. Counting
-- issues under it never moves a count down when a severity changes: `secscan_issues_detected_total` and the
-- backfilled past of the open issues both read it.
CREATE VIEW first_severities AS
-- The first of each issue's events of a kind, ranked rather than aggregated with arg_min (which PostgreSQL's
-- compatibility layer evaluates row by row); the workspace leads the partition, so a reader of one
-- workspace still ranks that workspace's events only.
WITH opened AS (
    SELECT workspace_id, issue_id, severity
    FROM (SELECT workspace_id, issue_id, severity,
                 row_number() OVER (PARTITION BY workspace_id, issue_id ORDER BY observed_at, severity) AS n
          FROM issue_events
          WHERE event = 'opened' AND severity IS NOT NULL AND observed_at IS NOT NULL) AS e
    WHERE n = 1
),
changed AS (
    SELECT workspace_id, issue_id, from_value AS severity
    FROM (SELECT workspace_id, issue_id, from_value,
                 row_number() OVER (PARTITION BY workspace_id, issue_id ORDER BY observed_at, from_value) AS n
          FROM issue_events
          WHERE event = 'severity_changed' AND from_value IS NOT NULL AND observed_at IS NOT NULL) AS e
    WHERE n = 1
)
SELECT
    i.workspace_id,
    i.id AS issue_id,
    i.project_id,
    coalesce(o.severity, c.severity, i.severity) AS severity
FROM issues AS i
-- Joined on the workspace too, so a reader of one workspace reads that workspace's events only.
LEFT JOIN opened AS o ON o.workspace_id = i.workspace_id AND o.issue_id = i.id
LEFT JOIN changed AS c ON c.workspace_id = i.workspace_id AND c.issue_id = i.id;
