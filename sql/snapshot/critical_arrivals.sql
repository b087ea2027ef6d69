-- Critical issues that arrived recently and are still open critical: what SecscanNewCriticalIssue pages on.
--
-- An arrival is a change that put an issue into "open and critical": seen for the first time open and
-- critical (new), found open again after a fix (reopened), raised to critical from another severity
-- (raised), or a false-positive / accepted-risk mark withdrawn (unmarked). Per issue only its latest
-- arrival counts, and only while the issue is still open and critical, so a fix or a mark removes the row
-- and the alert resolves.
--
-- Not paged, by construction:
-- * the backlog of a first deployment: events observed at or before the end of the workspace's first
--   successful issues sync (no such sync yet: nothing is an arrival);
-- * anything reconstructed from the service's past (it is never written to issue_events, and would sit
--   before that baseline anyway);
-- * arrivals older than the critical SLA window ($sla_critical days): by then SecscanSlaBreached owns it.
--
-- Bounded: at most $critical_new_limit rows per workspace, newest arrivals first; `arrivals` is the
-- workspace's full count, so the exporter can say how many were left out. Text is only what a
-- notification needs (title on one line, at most 200 characters, and the location); never explanation,
-- detail or evidence. Times leave as Unix seconds.
WITH baseline AS (
    SELECT a.workspace_id,
           (SELECT min(r.finished_at) FROM sync_runs r
             WHERE r.asset = 'issues' AND r.status = 'success'
               AND (r.workspace_id = a.workspace_id OR r.workspace_id IS NULL)) AS baseline_at
    FROM accounts a
),
arrival_events AS (
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
       OR (e.event = 'status_changed' AND e.from_value IN ('false_positive', 'accepted_risk')
           AND e.to_value = 'open' AND e.severity = 'critical')
       OR (e.event = 'severity_changed' AND e.to_value = 'critical')
),
-- One sync can record several arrival events for one issue (a fixed high found open and critical):
-- the strongest reason names the change, a severity change still says where it came from.
latest_at AS (
    SELECT workspace_id, issue_id, max(observed_at) AS arrived_at
    FROM arrival_events
    GROUP BY workspace_id, issue_id
),
latest AS (
    SELECT e.workspace_id, e.issue_id, e.observed_at AS arrived_at, min(e.kind) AS kind,
           max(e.from_severity) AS from_severity
    FROM arrival_events e
    JOIN latest_at l ON l.workspace_id = e.workspace_id AND l.issue_id = e.issue_id AND l.arrived_at = e.observed_at
    GROUP BY e.workspace_id, e.issue_id, e.observed_at
),
arrivals AS (
    SELECT l.*, i.project_id, coalesce(p.name, p.id) AS project, i.target_id, i.address, i.title,
           i.family, i.control_id, i.confidence, i.location, i.file, i.line, i."commit",
           coalesce(i.first_seen_at, i.first_observed_at) AS first_seen_at
    FROM latest l
    JOIN baseline b ON b.workspace_id = l.workspace_id
    JOIN issues i ON i.id = l.issue_id
    JOIN projects p ON p.id = i.project_id AND p.removed_at IS NULL
    WHERE b.baseline_at IS NOT NULL
      AND l.arrived_at > b.baseline_at
      AND l.arrived_at >= $now::TIMESTAMPTZ - to_days(CAST($sla_critical AS INTEGER))
      AND i.status = 'open' AND i.severity = 'critical'
),
ranked AS (
    SELECT *,
           row_number() OVER (PARTITION BY workspace_id ORDER BY arrived_at DESC, issue_id) AS rank,
           count(*) OVER (PARTITION BY workspace_id) AS workspace_arrivals
    FROM arrivals
)
SELECT
    workspace_id,
    project_id,
    project,
    issue_id,
    target_id,
    coalesce(address, '') AS address,
    left(regexp_replace(trim(coalesce(title, '')), '\s+', ' ', 'g'), 200) AS title,
    coalesce(family, '') AS family,
    coalesce(control_id, '') AS control_id,
    -- The service's own location (file:line@commit on a repository); rebuilt from its parts if absent.
    left(regexp_replace(coalesce(nullif(trim(location), ''),
         CASE WHEN file IS NOT NULL THEN file || coalesce(':' || line, '') || coalesce('@' || "commit", '') END,
         ''), '\s+', ' ', 'g'), 300) AS location,
    CASE kind WHEN 1 THEN 'new' WHEN 2 THEN 'reopened' WHEN 3 THEN 'unmarked' ELSE 'raised' END AS change,
    coalesce(from_severity, '') AS from_severity,
    epoch(first_seen_at) AS first_seen_at,
    epoch(arrived_at) AS arrived_at,
    workspace_arrivals
FROM ranked
WHERE rank <= $critical_new_limit
ORDER BY workspace_id, arrived_at DESC, issue_id
