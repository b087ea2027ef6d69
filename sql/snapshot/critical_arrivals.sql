-- What SecscanNewCriticalIssue pages on: the part's rows of the `critical_arrivals` view (which says which
-- critical issues are new, and why a first deployment's backlog is not), bounded for Prometheus.
--
-- * only arrivals within the critical SLA window of the project's SLA profile (its `sla_profiles` days, else
--   `sla_policy`'s): after it, SecscanSlaBreached owns it;
-- * each row names the project's team now (`project_owners_now`), so the page reaches that team;
-- * at most $critical_new_limit rows, newest arrivals first; `workspace_arrivals` is the workspace's full
--   count, so the exporter can say how many were left out;
-- * only the text a page needs: the title and the location on one line, control characters out, each cut to
--   its label's cap ($title_cap, $location_cap: LABEL_CAPS of pipelines/snapshot/labels.py, the one home of
--   what a label may keep);
--   never explanation, detail or evidence. Times leave as Unix seconds. U+FFFD goes with the control characters:
--   it is what a PostgreSQL history holds for a NUL (which its text cannot), so both engines page alike.
WITH ranked AS (
    SELECT a.*, o.team,
           row_number() OVER (ORDER BY a.arrived_at DESC, a.issue_id) AS rank,
           count(*) OVER () AS workspace_arrivals
    FROM critical_arrivals AS a
    LEFT JOIN project_owners_now AS o ON o.workspace_id = a.workspace_id AND o.project_id = a.project_id
    LEFT JOIN sla_profiles AS sp ON sp.profile = o.sla_profile AND sp.severity = 'critical'
    WHERE a.workspace_id = $workspace_id
      AND epoch(a.arrived_at) >= epoch(CAST($now AS TIMESTAMPTZ))
                                 - 86400 * coalesce(sp.days, (SELECT days FROM sla_policy WHERE severity = 'critical'))
)
SELECT
    workspace_id,
    team,
    project_id,
    project,
    issue_id,
    target_id,
    coalesce(address, '') AS address,
    left(trim(regexp_replace(coalesce(title, ''), '[[:cntrl:][:space:]�]+', ' ', 'g')), $title_cap) AS title,
    coalesce(family, '') AS family,
    coalesce(control_id, '') AS control_id,
    -- The service's own location (file:line@commit on a repository); rebuilt from its parts if absent.
    left(trim(regexp_replace(coalesce(nullif(trim(location), ''),
         CASE WHEN file IS NOT NULL THEN file || coalesce(':' || line, '') || coalesce('@' || "commit", '') END,
         ''), '[[:cntrl:][:space:]�]+', ' ', 'g')), $location_cap) AS location,
    change,
    coalesce(from_severity, '') AS from_severity,
    epoch(first_seen_at) AS first_seen_at,
    epoch(arrived_at) AS arrived_at,
    workspace_arrivals
FROM ranked
WHERE rank <= $critical_new_limit
ORDER BY arrived_at DESC, issue_id;
