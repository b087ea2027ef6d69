-- Visible: every issue the service still shows (no `hidden_reason`: its site is proved, its target and
-- project listed), with its project's label and its target's kind. An issue set aside counts in
-- `secscan_issues_not_visible` and in nothing else; every count of issues by status (/metrics, the cookbook)
-- reads this view or `open_issues_now`, which reads it.
CREATE VIEW visible_issues AS
SELECT i.*, p.project AS project_name, t.kind AS target_kind
FROM issues AS i
-- Joined on the workspace too, so a reader of one workspace reads that workspace's projects and targets only.
JOIN project_labels AS p ON p.workspace_id = i.workspace_id AND p.project_id = i.project_id AND p.listed
LEFT JOIN target_states AS t ON t.workspace_id = i.workspace_id AND t.id = i.target_id
WHERE i.hidden_reason IS NULL
  AND (t.id IS NULL OR t.listed);
