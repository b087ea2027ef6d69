-- The span of one workspace's staged past: its earliest issue change or scored scan, and its first sync.
SELECT
    least((SELECT min(ts) FROM _bf_changes), (SELECT min(finished_at) FROM _bf_scans)) AS first_data,
    (SELECT first_observed_at FROM first_observations WHERE workspace_id = $workspace_id) AS first_observed_at
