-- The service's id of a followed workspace, from its name (NULL: the one workspace of the two variables).
SELECT workspace_id FROM accounts
WHERE workspace_label IS NOT DISTINCT FROM $label
ORDER BY last_observed_at DESC
LIMIT 1;
