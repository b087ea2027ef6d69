-- Whether the merge's workspace holds a project or target GET /projects stopped listing. A pass that read no
-- issue list (issues_hidden.sql with no $listed_projects) can set aside only their issues: without one, it
-- has nothing to do.
SELECT EXISTS (SELECT 1 FROM project_states
               WHERE workspace_id = (SELECT workspace_id FROM merge_context) AND NOT listed)
    OR EXISTS (SELECT 1 FROM target_states
               WHERE workspace_id = (SELECT workspace_id FROM merge_context) AND NOT listed);
