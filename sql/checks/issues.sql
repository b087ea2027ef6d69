-- The checks of `issues`, one column each (named after its check), each counting the rows that break it: one
-- pass over the table rather than one per check (each pass over 390k issues took about 0.2 s on PostgreSQL).
-- A workspace's run checks its workspace's rows ($workspace_id), so a check costs the same with a thousand
-- workspaces as with one; a run of no workspace ($every) checks every row.
--   fixed_exactly_when_fixed_at: issues fixed without fixed_at, or with fixed_at and another status;
--   last_seen_not_before_first_seen: issues last seen before they were first seen;
--   issue_targets_exist: issues whose target is not in the history;
--   no_issues_of_unverified_targets: issues read while their site was unproved (the service hides those
--     issues, so none should be);
--   issue_ids_unique: issue ids that appear on more than one row, each extra row counted.
SELECT
    count(*) FILTER (WHERE (i.status = 'fixed') <> (i.fixed_at IS NOT NULL)) AS fixed_exactly_when_fixed_at,
    count(*) FILTER (WHERE i.last_seen_at < i.first_seen_at) AS last_seen_not_before_first_seen,
    count(*) FILTER (WHERE t.id IS NULL) AS issue_targets_exist,
    count(*) FILTER (WHERE t.site_unproved AND t.listed
                       AND i.last_observed_at >= t.last_observed_at) AS no_issues_of_unverified_targets,
    -- The distinct ids apart: PostgreSQL reads them in order from the key's index rather than sorting the
    -- joined rows (one row per issue, as `targets` keeps a key).
    count(*) - (SELECT count(*) FROM (SELECT DISTINCT id FROM issues
                                      WHERE $every OR workspace_id = $workspace_id) AS d) AS issue_ids_unique
FROM issues AS i
LEFT JOIN target_states AS t ON t.workspace_id = i.workspace_id AND t.id = i.target_id
WHERE $every OR i.workspace_id = $workspace_id;
