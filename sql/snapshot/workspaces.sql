-- The part's workspace: plan, access, period, credits, project counts (with the listed projects no rule of
-- the ownership map claims), and pipeline freshness.
-- last_success is the end of the last sync run in which no asset failed (a run where the account read
-- but the issues failed is not a successful sync), counting the runs recorded before the account was read
-- under the followed name alone.
WITH runs AS (
    SELECT run_id, finished_at, status, rate_limit_remaining
    FROM workspace_runs
    WHERE workspace_id = $workspace_id OR (workspace_id IS NULL AND workspace_label = $label)
),
good_runs AS (
    SELECT run_id, max(finished_at) AS finished_at
    FROM runs
    GROUP BY run_id
    HAVING count(*) FILTER (WHERE status <> 'success') = 0
)
SELECT
    a.workspace_id,
    a.plan,
    a.api_access_allowed,
    epoch(a.trial_ends_at) AS trial_ends_at,
    epoch(a.period_start) AS period_start,
    epoch(a.period_end) AS period_end,
    a.free_fixes_left,
    a.pack_credits_scans,
    a.pack_credits_fixes,
    a.projects_limit,
    a.projects_used,
    a.projects_paused,
    (SELECT count(*) FROM project_labels AS l
     JOIN project_owners_now AS o ON o.workspace_id = l.workspace_id AND o.project_id = l.project_id
     WHERE l.workspace_id = $workspace_id AND l.listed AND o.rule IS NULL) AS projects_unowned,
    a.addresses_per_project,
    CAST(a.features AS VARCHAR) AS features,
    a.service_version,
    epoch(a.last_observed_at) AS last_observed_at,
    epoch((SELECT max(finished_at) FROM good_runs)) AS last_success,
    (SELECT rate_limit_remaining FROM runs WHERE rate_limit_remaining IS NOT NULL AND finished_at IS NOT NULL
     ORDER BY finished_at DESC, run_id DESC LIMIT 1) AS rate_limit_remaining
FROM accounts AS a
WHERE a.workspace_id = $workspace_id;
