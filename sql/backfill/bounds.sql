-- What to reconstruct for one workspace: from the first day any scan finished or issue was seen, to the
-- day before scanwatch first observed it. No first observation (never synced): nothing to do.
-- Never before the service's own history: it lists a year of scans ($free_history_days on Free), so a
-- record dated earlier (an issue "first seen" in year 1) starts the rebuilt days no earlier than that;
-- what it counts is open on the first day rebuilt.
WITH data AS (
    SELECT CAST(timezone('UTC', least(
        (SELECT min(ts) FROM _bf_changes), (SELECT min(finished_at) FROM _bf_scans)
    )) AS DATE) AS first_day
)
SELECT
    f.first_observed_at,
    CASE WHEN d.first_day IS NOT NULL THEN greatest(d.first_day, f.first_observed_day
        - CAST(CASE WHEN a.plan = 'free' THEN $free_history_days ELSE $history_days END AS INTEGER)) END AS first_day,
    f.first_observed_day - 1 AS last_day
FROM first_observations AS f
CROSS JOIN data AS d
LEFT JOIN accounts AS a ON a.workspace_id = f.workspace_id
WHERE f.workspace_id = $workspace_id
