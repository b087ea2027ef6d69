-- Each project's current period of ownership in the workspace (the rows a sync compares the map's answer with).
SELECT project_id, team, sla_profile, rule
FROM project_owners
WHERE workspace_id = $workspace_id AND valid_to IS NULL;
