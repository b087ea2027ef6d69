-- stg_account: the account's one row, its nested objects flattened into columns and typed like every staged
-- list (pipelines/storage/entities.py); stg_quotas: one row per quota the service names, including ones this
-- version does not know yet.
INSERT INTO accounts (workspace_id, workspace_name, plan, api_access_allowed, trial_ends_at, period_start, period_end,
                      free_fixes_left, pack_credits_scans, pack_credits_fixes, projects_limit, projects_used,
                      projects_paused, addresses_per_project, features, service_version,
                      first_observed_at, last_observed_at)
SELECT a.workspace_id, a.workspace_name, a.plan, a.api_access_allowed, a.trial_ends_at, a.period_start, a.period_end,
       a.free_fixes_left, a.pack_credits_scans, a.pack_credits_fixes, a.projects_limit, a.projects_used,
       a.projects_paused, a.addresses_per_project, a.features, c.service_version,
       c.observed_at, c.observed_at
FROM stg_account AS a, merge_context AS c
ON CONFLICT (workspace_id) DO UPDATE SET
    workspace_name = excluded.workspace_name, plan = excluded.plan, api_access_allowed = excluded.api_access_allowed,
    trial_ends_at = excluded.trial_ends_at, period_start = excluded.period_start, period_end = excluded.period_end,
    free_fixes_left = excluded.free_fixes_left, pack_credits_scans = excluded.pack_credits_scans,
    pack_credits_fixes = excluded.pack_credits_fixes, projects_limit = excluded.projects_limit,
    projects_used = excluded.projects_used, projects_paused = excluded.projects_paused,
    addresses_per_project = excluded.addresses_per_project, features = excluded.features,
    service_version = excluded.service_version, last_observed_at = excluded.last_observed_at;

INSERT INTO quota_snapshots (workspace_id, observed_at, quota, "limit", used, remaining, period_start, period_end)
SELECT a.workspace_id, c.observed_at, q.quota, q."limit", q.used, q.remaining, a.period_start, a.period_end
FROM stg_quotas AS q, stg_account AS a, merge_context AS c;

-- This sync's quota rows, the count the merge reports (not the whole, ever-growing table).
SELECT count(*) FROM quota_snapshots
WHERE observed_at = (SELECT observed_at FROM merge_context) AND workspace_id IN (SELECT workspace_id FROM stg_account);
