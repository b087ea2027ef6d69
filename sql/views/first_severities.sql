-- The severity each issue was first seen with: that of its `opened` event, else (a history that holds no
-- opened event for it) the value its first severity change started from, else its severity now. Counting
-- issues under it never moves a count down when a severity changes: `secscan_issues_detected_total` and the
-- backfilled past of the open issues both read it.
CREATE VIEW first_severities AS
WITH opened AS (
    SELECT workspace_id, issue_id, arg_min(severity, observed_at) AS severity
    FROM issue_events
    WHERE event = 'opened' AND severity IS NOT NULL
    GROUP BY workspace_id, issue_id
),
changed AS (
    SELECT workspace_id, issue_id, arg_min(from_value, observed_at) AS severity
    FROM issue_events
    WHERE event = 'severity_changed' AND from_value IS NOT NULL
    GROUP BY workspace_id, issue_id
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
