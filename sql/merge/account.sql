-- stg_account: one row, JSON objects kept as JSON text.
INSERT INTO accounts (workspace_id, workspace_name, plan, api_access_allowed, trial_ends_at, period_start, period_end,
                      free_fixes_left, pack_credits_scans, pack_credits_fixes, projects_limit, projects_used,
                      projects_paused, addresses_per_project, features, service_version,
                      first_observed_at, last_observed_at)
SELECT json_extract_string(workspace, '$.id'), json_extract_string(workspace, '$.name'), plan,
       TRY_CAST(json_extract_string(api_access, '$.allowed') AS BOOLEAN),
       TRY_CAST(json_extract_string(api_access, '$.trial_ends_at') AS TIMESTAMPTZ),
       TRY_CAST(json_extract_string(period, '$.start') AS TIMESTAMPTZ),
       TRY_CAST(json_extract_string(period, '$.end') AS TIMESTAMPTZ),
       free_fixes_left,
       TRY_CAST(json_extract_string(pack_credits, '$.scans') AS INTEGER),
       TRY_CAST(json_extract_string(pack_credits, '$.fixes') AS INTEGER),
       TRY_CAST(json_extract_string(projects, '$.limit') AS INTEGER),
       TRY_CAST(json_extract_string(projects, '$.used') AS INTEGER),
       TRY_CAST(json_extract_string(projects, '$.paused') AS INTEGER),
       addresses_per_project, features, getvariable('service_version'),
       getvariable('now'), getvariable('now')
FROM stg_account
ON CONFLICT (workspace_id) DO UPDATE SET
    workspace_name = excluded.workspace_name, plan = excluded.plan, api_access_allowed = excluded.api_access_allowed,
    trial_ends_at = excluded.trial_ends_at, period_start = excluded.period_start, period_end = excluded.period_end,
    free_fixes_left = excluded.free_fixes_left, pack_credits_scans = excluded.pack_credits_scans,
    pack_credits_fixes = excluded.pack_credits_fixes, projects_limit = excluded.projects_limit,
    projects_used = excluded.projects_used, projects_paused = excluded.projects_paused,
    addresses_per_project = excluded.addresses_per_project, features = excluded.features,
    service_version = excluded.service_version, last_observed_at = excluded.last_observed_at;

-- Every quota the service names, including ones this version does not know yet.
INSERT INTO quota_snapshots (workspace_id, observed_at, quota, "limit", used, remaining, period_start, period_end)
SELECT json_extract_string(a.workspace, '$.id'), getvariable('now'), q.quota,
       TRY_CAST(json_extract_string(a.quotas, '$.' || q.quota || '.limit') AS INTEGER),
       TRY_CAST(json_extract_string(a.quotas, '$.' || q.quota || '.used') AS INTEGER),
       TRY_CAST(json_extract_string(a.quotas, '$.' || q.quota || '.remaining') AS INTEGER),
       TRY_CAST(json_extract_string(a.period, '$.start') AS TIMESTAMPTZ),
       TRY_CAST(json_extract_string(a.period, '$.end') AS TIMESTAMPTZ)
FROM stg_account a, unnest(json_keys(a.quotas)) AS q(quota);

-- This sync's quota rows, the count the merge reports (not the whole, ever-growing table).
SELECT count(*) FROM quota_snapshots WHERE observed_at = getvariable('now');
