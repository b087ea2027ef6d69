-- When scanwatch first observed each workspace: its first sync. Days before first_observed_day are
-- reconstructed (`scanwatch backfill`); from it on the history holds observations.
CREATE VIEW first_observations AS
WITH seen AS (
    SELECT workspace_id, first_observed_at AS seen_at FROM accounts
    UNION ALL SELECT workspace_id, first_observed_at FROM projects
    UNION ALL SELECT workspace_id, observed_at FROM score_snapshots
)
SELECT
    workspace_id,
    min(seen_at) AS first_observed_at,
    CAST(timezone('UTC', min(seen_at)) AS DATE) AS first_observed_day
FROM seen
WHERE workspace_id IS NOT NULL
GROUP BY workspace_id;
