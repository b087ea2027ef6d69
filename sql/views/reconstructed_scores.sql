-- The reconstruction's scores per UTC day before a workspace's first observation (`scanwatch backfill`): one
-- row per target (and per project, target_id NULL) and day, the state at the end of the day, as the table of
-- this name held before schema 20. The history keeps them as runs of days (`reconstructed_score_runs`).
CREATE VIEW reconstructed_scores AS
SELECT r.workspace_id, CAST(d.d AS DATE) AS day, r.project_id, r.target_id, r.score, r.grade, r.scan_id
FROM reconstructed_score_runs AS r
CROSS JOIN LATERAL generate_series(CAST(r.first_day AS TIMESTAMP), CAST(r.last_day AS TIMESTAMP),
                                   INTERVAL '1 day') AS d(d);
