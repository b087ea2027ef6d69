-- Issues the service no longer shows, and why. An issue list is complete for its project, so a stored issue
-- that is not listed has a reason: its project or target was removed (GET /projects stopped listing it), or
-- its site lost its proof (issues of an unproved site are hidden, only counted in hidden_issues). Such an
-- issue keeps its status (the service never said it was fixed) and leaves every open count.
--
-- $listed_projects, the projects whose complete issue lists were read in this transaction (empty when called
-- by the projects merge), and table listed_issue_ids, the ids those lists held (none for the projects
-- merge), joined by $quarantined: issues listed but too large to store, not ones the service stopped showing.
-- The reasons' words are pipelines/core/vocabulary.py's ($project_removed, $target_removed, $unverified).
-- An issue missing from a list with none of these reasons is left as it is: the contract gives no other way
-- for one to disappear.
CREATE TEMP TABLE IF NOT EXISTS listed_issue_ids (id VARCHAR);
INSERT INTO listed_issue_ids SELECT unnest(CAST($quarantined AS VARCHAR[]));

INSERT INTO issue_events (workspace_id, issue_id, project_id, target_id, severity, observed_at, event, from_value, to_value)
WITH reasons AS (
    SELECT i.id, i.project_id, i.target_id, i.severity, i.hidden_reason AS old_reason,
           CASE
               WHEN NOT p.listed THEN $project_removed
               WHEN NOT t.listed THEN $target_removed
               WHEN i.hidden_reason IS NOT NULL THEN i.hidden_reason
               WHEN i.project_id = ANY(CAST($listed_projects AS VARCHAR[]))
                    AND t.site_unproved
                   THEN $unverified
           END AS reason
    FROM issues i
    -- joined on the workspace as well as the id: the workspace's projects and targets, not every workspace's
    LEFT JOIN project_states p ON p.workspace_id = i.workspace_id AND p.id = i.project_id
    LEFT JOIN target_states t ON t.workspace_id = i.workspace_id AND t.id = i.target_id
    WHERE i.workspace_id = (SELECT workspace_id FROM merge_context)
      AND NOT EXISTS (SELECT 1 FROM listed_issue_ids l WHERE l.id = i.id)  -- a listed issue is visible, whatever else
)
SELECT c.workspace_id, r.id, r.project_id, r.target_id, r.severity, c.observed_at, 'hidden', r.old_reason, r.reason
FROM reasons AS r, merge_context AS c
WHERE r.reason IS DISTINCT FROM r.old_reason AND r.reason IS NOT NULL;

UPDATE issues SET hidden_reason = e.to_value, hidden_at = coalesce(issues.hidden_at, e.observed_at)
FROM issue_events e
WHERE e.issue_id = issues.id AND e.event = 'hidden' AND e.observed_at = (SELECT observed_at FROM merge_context)
  AND e.workspace_id = (SELECT workspace_id FROM merge_context);

DROP TABLE listed_issue_ids;
