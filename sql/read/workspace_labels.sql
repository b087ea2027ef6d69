-- The followed names the history holds, for the line that refuses an unknown one ($default_workspace, from
-- pipelines/core/credentials.py, for the one workspace of the two variables).
SELECT coalesce(workspace_label, $default_workspace) FROM accounts ORDER BY 1;
