-- The critical issues that page: one home for "which critical issues are new". The metrics snapshot
-- (SecscanNewCriticalIssue) and the cookbook's `new_critical_issues` both read it.
--
-- An arrival is a change that put an issue into "open and critical": seen for the first time open and
-- critical (new), found open again after a fix (reopened: a regression, as `status_moves` decides it),
-- raised to critical from another severity (raised), or a false-positive / accepted-risk mark withdrawn
-- (unmarked: a status `issue_statuses` calls dismissed). Per issue only its latest arrival counts, and only
-- while the issue is open and visible (`open_issues_now`) and critical: a fix, a mark, a lower severity or
-- hiding removes the row. An issue listed again after being set aside returns without an arrival
-- (`visible_again` is not one).
--
-- The backlog of a first deployment is not an arrival: events observed at or before the end of the
-- workspace's first successful issues sync (`workspace_runs`) are excluded, and with no such sync nothing is an
-- arrival. Reconstructed history is never in issue_events, and would sit before that baseline anyway.
CREATE VIEW critical_arrivals AS
WITH arrival_events AS (
    SELECT e.workspace_id, e.issue_id, e.observed_at, 1 AS kind, CAST(NULL AS VARCHAR) AS from_severity
    FROM issue_events AS e
    WHERE e.event = 'opened' AND e.to_value = 'open' AND e.severity = 'critical'
    UNION ALL
    -- Back to open after a fix (a regression), or a mark withdrawn: `issue_transitions` says which.
    SELECT x.workspace_id, x.issue_id, x.observed_at, CASE WHEN x.regression THEN 2 ELSE 3 END, NULL
    FROM issue_transitions AS x
    WHERE (x.regression OR x.unmark) AND x.opening AND x.severity = 'critical'
    UNION ALL
    SELECT e.workspace_id, e.issue_id, e.observed_at, 4, e.from_value
    FROM issue_events AS e
    WHERE e.event = 'severity_changed' AND e.to_value = 'critical'
),
-- Each CTE is read once, so a reader of one workspace reads only that workspace's events.
ranked AS (
    SELECT e.*, max(e.observed_at) OVER (PARTITION BY e.workspace_id, e.issue_id) AS arrived_at
    FROM arrival_events AS e
),
-- One sync can record several arrival events for one issue (a fixed high found open and critical):
-- the strongest reason names the change, a severity change still says where it came from.
latest AS (
    SELECT workspace_id, issue_id, arrived_at, min(kind) AS kind, max(from_severity) AS from_severity
    FROM ranked
    WHERE observed_at = arrived_at
    GROUP BY workspace_id, issue_id, arrived_at
),
baseline AS MATERIALIZED (
    SELECT workspace_id, min(finished_at) AS baseline_at
    FROM workspace_runs
    WHERE asset = 'issues' AND status = 'success'
    GROUP BY workspace_id
)
SELECT
    l.workspace_id,
    i.project_id,
    i.project_name AS project,
    l.issue_id,
    i.target_id,
    i.address,
    i.title,
    i.family,
    i.control_id,
    i.confidence,
    i.location,
    i.file,
    i.line,
    i."commit",
    CASE l.kind WHEN 1 THEN 'new' WHEN 2 THEN 'reopened' WHEN 3 THEN 'unmarked' ELSE 'raised' END AS change,
    l.from_severity,
    coalesce(i.first_seen_at, i.first_observed_at) AS first_seen_at,
    l.arrived_at
FROM latest AS l
JOIN baseline AS b ON b.workspace_id = l.workspace_id
JOIN open_issues_now AS i ON i.workspace_id = l.workspace_id AND i.id = l.issue_id
WHERE b.baseline_at IS NOT NULL
  AND l.arrived_at > b.baseline_at
  AND i.severity = 'critical';
