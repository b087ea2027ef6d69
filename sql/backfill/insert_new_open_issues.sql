-- New reconstructed open-issue counts not stored yet: a re-run on the same history inserts nothing.
INSERT INTO reconstructed_open_issues
SELECT * FROM _bf_new_open AS n
WHERE NOT EXISTS (
    SELECT 1 FROM reconstructed_open_issues AS r
    WHERE r.workspace_id = $workspace_id AND n.day = r.day AND n.project_id = r.project_id
      AND n.severity = r.severity AND n.open_issues = r.open_issues
)
