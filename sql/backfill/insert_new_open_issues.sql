-- New reconstructed open-issue runs not stored yet: a re-run on the same history inserts nothing.
INSERT INTO reconstructed_open_issue_runs
SELECT * FROM _bf_new_open AS n
WHERE NOT EXISTS (
    SELECT 1 FROM reconstructed_open_issue_runs AS r
    WHERE r.workspace_id = $workspace_id AND n.first_day = r.first_day AND n.last_day = r.last_day
      AND n.project_id = r.project_id AND n.severity = r.severity AND n.open_issues = r.open_issues
)
