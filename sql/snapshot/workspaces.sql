-- One row per followed workspace: plan, access, period, credits, project counts, and pipeline freshness.
-- last_success falls back to runs recorded without a workspace (a single-workspace deployment).
WITH runs AS (
    SELECT workspace_id, finished_at, status, rate_limit_remaining, service_version
    FROM sync_runs
)
SELECT
    a.workspace_id,
    coalesce(a.workspace_name, a.workspace_id) AS workspace,
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
        (SELECT max(r.finished_at) FROM runs r WHERE r.status = 'success' AND r.workspace_id = a.workspace_id),
        (SELECT max(r.finished_at) FROM runs r WHERE r.status = 'success' AND r.workspace_id IS NULL)
    )) AS last_success,
    (SELECT arg_max(r.rate_limit_remaining, r.finished_at) FROM runs r
      WHERE r.rate_limit_remaining IS NOT NULL AND (r.workspace_id = a.workspace_id OR r.workspace_id IS NULL)
    ) AS rate_limit_remaining
FROM accounts a
ORDER BY a.workspace_id
