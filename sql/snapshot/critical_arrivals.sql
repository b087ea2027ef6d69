-- What SecscanNewCriticalIssue pages on: the part's rows of the `critical_arrivals` view (which says which
-- critical issues are new, and why a first deployment's backlog is not), bounded for Prometheus.
--
-- * only arrivals within the critical SLA window (`sla_policy`): after it, SecscanSlaBreached owns it;
-- * at most $critical_new_limit rows, newest arrivals first; `workspace_arrivals` is the workspace's full
--   count, so the exporter can say how many were left out;
-- * only the text a page needs: the title and the location on one line, control characters out, each cut to
--   its label's cap ($title_cap, $location_cap: LABEL_CAPS of pipelines/snapshot/labels.py, the one home of
--   what a label may keep);
--   never explanation, detail or evidence. Times leave as Unix seconds. U+FFFD goes with the control characters:
--   it is what a PostgreSQL history holds for a NUL (which its text cannot), so both engines page alike.
WITH ranked AS (
    SELECT *,
           row_number() OVER (ORDER BY arrived_at DESC, issue_id) AS rank,
           count(*) OVER () AS workspace_arrivals
    FROM critical_arrivals
    WHERE workspace_id = $workspace_id
      AND epoch(arrived_at) >= epoch(CAST($now AS TIMESTAMPTZ))
                               - 86400 * (SELECT days FROM sla_policy WHERE severity = 'critical')
)
SELECT
    workspace_id,
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
