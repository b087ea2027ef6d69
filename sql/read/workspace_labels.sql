-- The followed names the history holds, for the line that refuses an unknown one.
SELECT coalesce(workspace_label, 'default') FROM accounts ORDER BY 1;
