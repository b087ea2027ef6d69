-- Is it safe to store what this key answered under this name? One row per conflict:
--   'moved'  : the name is bound to another workspace id (the key now answers for another workspace); the
--              unnamed workspace of the two variables (`default`, a NULL label) is bound like any name;
--   'taken'  : the workspace id is followed under another name already (a named workspace only).
SELECT 'moved' AS conflict, workspace_id AS other_id, coalesce(workspace_name, workspace_id) AS other_name
FROM accounts  -- the name IS NOT DISTINCT FROM $label, spelled so that an index looks the name up
WHERE (workspace_label = $label OR (workspace_label IS NULL AND $label IS NULL)) AND workspace_id <> $workspace_id
UNION ALL
SELECT 'taken', workspace_id, workspace_label
FROM accounts WHERE workspace_id = $workspace_id AND workspace_label IS DISTINCT FROM $label
  AND workspace_label IS NOT NULL AND $label IS NOT NULL;
