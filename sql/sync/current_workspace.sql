-- The service's id of a followed workspace, from its name (NULL: the one workspace of the two variables).
SELECT workspace_id FROM followed_workspaces
WHERE label IS NOT DISTINCT FROM $label;
