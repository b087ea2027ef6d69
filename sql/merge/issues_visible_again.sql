-- stg_issues: complete issue lists read this run. A hidden issue listed again (its site proved once more, or
-- its project or target listed again) returns to the status the list gives, with a `visible_again` event;
-- the status diff that follows records a real change, never a `reopened` for the return itself.
--
-- Every id a list held joins listed_issue_ids, group after group, for issues_hidden.sql at the end of the
-- merge, which drops it (a failed merge's rollback takes it away too).
CREATE TEMP TABLE IF NOT EXISTS listed_issue_ids (id VARCHAR);
INSERT INTO listed_issue_ids SELECT id FROM stg_issues;

INSERT INTO issue_events (workspace_id, issue_id, project_id, target_id, severity, observed_at, event, from_value, to_value)
SELECT c.workspace_id, s.id, s.project_id, s.target_id, s.severity, c.observed_at, 'visible_again',
       i.hidden_reason, s.status
FROM stg_issues s
JOIN issues i ON i.id = s.id
CROSS JOIN merge_context AS c
WHERE i.hidden_reason IS NOT NULL;

UPDATE issues SET hidden_reason = NULL, hidden_at = NULL
WHERE hidden_reason IS NOT NULL AND id IN (SELECT id FROM stg_issues);
