-- The service's id of a followed workspace, from its name (NULL: the one workspace of the two variables).
SELECT workspace_id FROM followed_workspaces
-- IS NOT DISTINCT FROM, spelled so that the name is a value an index looks up (not every workspace's row read)
WHERE label = $label OR (label IS NULL AND $label IS NULL);
