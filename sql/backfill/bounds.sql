-- What to reconstruct for one workspace: from the first day any scan finished or issue was seen, to the
-- day before scanwatch first observed it. No first observation (never synced): nothing to do.
SELECT
    f.first_observed_at,
    CAST(timezone('UTC', least(
        (SELECT min(ts) FROM _bf_changes), (SELECT min(finished_at) FROM _bf_scans)
    )) AS DATE) AS first_day,
    f.first_observed_day - 1 AS last_day
FROM first_observations AS f
WHERE f.workspace_id = $workspace_id
