-- One row per followed workspace: plan, access, period, credits, project counts, and pipeline freshness.
-- last_success is the end of the last sync run in which no asset failed (a run where the account read
-- but the issues failed is not a successful sync); it falls back to runs recorded without a workspace id
-- under the same followed name (a run that failed before the account was read carries only the name).
WITH runs AS (
    SELECT workspace_id, workspace_label, finished_at, status, rate_limit_remaining, service_version
    FROM sync_runs
),
good_runs AS (
    SELECT workspace_id, workspace_label, run_id, max(finished_at) AS finished_at, 'success' AS status
    FROM sync_runs
    GROUP BY workspace_id, workspace_label, run_id
    HAVING count(*) FILTER (WHERE status <> 'success') = 0
)
SELECT
    a.workspace_id,
    coalesce(a.workspace_label, a.workspace_name, a.workspace_id) AS workspace,
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
    a.addresses_per_project,
    CAST(a.features AS VARCHAR) AS features,
    a.service_version,
    epoch(a.last_observed_at) AS last_observed_at,
    epoch(coalesce(
        (SELECT max(r.finished_at) FROM good_runs r WHERE r.workspace_id = a.workspace_id),
        (SELECT max(r.finished_at) FROM good_runs r
          WHERE r.workspace_id IS NULL AND r.workspace_label IS NOT DISTINCT FROM a.workspace_label)
    )) AS last_success,
    (SELECT arg_max(r.rate_limit_remaining, r.finished_at) FROM runs r
      WHERE r.rate_limit_remaining IS NOT NULL AND (r.workspace_id = a.workspace_id OR (
          r.workspace_id IS NULL AND r.workspace_label IS NOT DISTINCT FROM a.workspace_label))
    ) AS rate_limit_remaining
FROM accounts a
ORDER BY a.workspace_id
