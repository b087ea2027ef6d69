-- Reconstructed open-issue runs of the workspace that the new reconstruction no longer has.
DELETE FROM reconstructed_open_issue_runs AS r
WHERE r.workspace_id = $workspace_id
  AND NOT EXISTS (
    SELECT 1 FROM _bf_new_open AS n
    WHERE n.first_day = r.first_day AND n.last_day = r.last_day AND n.project_id = r.project_id
      AND n.severity = r.severity AND n.open_issues = r.open_issues
  )
