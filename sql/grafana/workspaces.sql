-- The `workspace` variable: every workspace by the name its metrics carry.
SELECT workspace FROM workspace_labels ORDER BY workspace
