-- The span of one workspace's staged past: its earliest issue change or scored scan, but never before the
-- service's own history (a year of scans, $free_history_days on Free, before the first sync), and its
-- first sync (NULL when never synced).
WITH f AS (
    SELECT o.first_observed_at,
           CAST(CASE WHEN a.plan = 'free' THEN $free_history_days ELSE $history_days END AS INTEGER) AS days
    FROM first_observations AS o
    LEFT JOIN accounts AS a ON a.workspace_id = o.workspace_id
    WHERE o.workspace_id = $workspace_id
)
SELECT
    CASE WHEN least((SELECT min(ts) FROM _bf_changes), (SELECT min(finished_at) FROM _bf_scans)) IS NOT NULL
        THEN greatest(least((SELECT min(ts) FROM _bf_changes), (SELECT min(finished_at) FROM _bf_scans)),
                      (SELECT first_observed_at - days * INTERVAL '1 day' FROM f))
    END AS first_data,
    (SELECT first_observed_at FROM f) AS first_observed_at
