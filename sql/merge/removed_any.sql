-- Whether the merge's workspace holds a project or target GET /projects stopped listing. A pass that read no
-- issue list (issues_hidden.sql with no $listed_projects) can set aside only their issues: without one, it
-- has nothing to do.
SELECT EXISTS (SELECT 1 FROM projects
               WHERE workspace_id = (SELECT workspace_id FROM merge_context) AND removed_at IS NOT NULL)
    OR EXISTS (SELECT 1 FROM targets
               WHERE workspace_id = (SELECT workspace_id FROM merge_context) AND removed_at IS NOT NULL);
