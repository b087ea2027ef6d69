-- The reconstruction's open issues per project, severity and UTC day before a workspace's first observation
-- (`scanwatch backfill`), at the end of the day, as the table of this name held before schema 20. The history
-- keeps them as runs of days (`reconstructed_open_issue_runs`).
CREATE VIEW reconstructed_open_issues AS
SELECT r.workspace_id, CAST(d.d AS DATE) AS day, r.project_id, r.severity, r.open_issues
FROM reconstructed_open_issue_runs AS r
CROSS JOIN LATERAL generate_series(CAST(r.first_day AS TIMESTAMP), CAST(r.last_day AS TIMESTAMP),
                                   INTERVAL '1 day') AS d(d);
