-- scanwatch history, schema version 9: `critical_arrivals` (migration 004) reads which statuses are a
-- person's mark from the `issue_statuses` reference table (migration 006, filled from
-- pipelines/vocabulary.py) instead of naming them. The view is otherwise unchanged, restated here because a
-- migration that redefines a view gives its whole body; see 004 for what an arrival is.
-- Only replaces a view: safe on any existing history, and applying it twice is harmless.
CREATE OR REPLACE VIEW critical_arrivals AS
WITH arrival_events AS (
    SELECT e.workspace_id, e.issue_id, e.observed_at,
           CASE
               WHEN e.event = 'opened' THEN 1
               WHEN e.event = 'reopened' THEN 2
               WHEN e.event = 'status_changed' THEN 3
               ELSE 4
           END AS kind,
           CASE WHEN e.event = 'severity_changed' THEN e.from_value END AS from_severity
    FROM issue_events e
    WHERE (e.event = 'opened' AND e.to_value = 'open' AND e.severity = 'critical')
       OR (e.event = 'reopened' AND e.to_value = 'open' AND e.severity = 'critical')
       OR (e.event = 'status_changed' AND e.from_value IN (SELECT status FROM issue_statuses WHERE dismissed)
           AND e.to_value = 'open' AND e.severity = 'critical')
       OR (e.event = 'severity_changed' AND e.to_value = 'critical')
),
latest_at AS (
    SELECT workspace_id, issue_id, max(observed_at) AS arrived_at
    FROM arrival_events
    GROUP BY workspace_id, issue_id
),
-- One sync can record several arrival events for one issue (a fixed high found open and critical):
-- the strongest reason names the change, a severity change still says where it came from.
latest AS (
    SELECT e.workspace_id, e.issue_id, e.observed_at AS arrived_at, min(e.kind) AS kind,
           max(e.from_severity) AS from_severity
    FROM arrival_events e
    JOIN latest_at l ON l.workspace_id = e.workspace_id AND l.issue_id = e.issue_id AND l.arrived_at = e.observed_at
    GROUP BY e.workspace_id, e.issue_id, e.observed_at
),
baseline AS (
    SELECT w.workspace_id,
           (SELECT min(r.finished_at) FROM sync_runs r
             WHERE r.asset = 'issues' AND r.status = 'success'
               AND (r.workspace_id = w.workspace_id OR r.workspace_id IS NULL)) AS baseline_at
    FROM (SELECT DISTINCT workspace_id FROM latest) w
)
SELECT
    l.workspace_id,
    i.project_id,
    coalesce(p.name, p.id) AS project,
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
FROM latest l
JOIN baseline b ON b.workspace_id = l.workspace_id
JOIN issues i ON i.id = l.issue_id
JOIN projects p ON p.id = i.project_id AND p.removed_at IS NULL
WHERE b.baseline_at IS NOT NULL
  AND l.arrived_at > b.baseline_at
  AND i.status = 'open' AND i.severity = 'critical' AND i.hidden_reason IS NULL;
