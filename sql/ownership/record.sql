-- A new period of ownership for each named project of the workspace, from $now: its current period (if any)
-- ends at $now, and the new one starts there. $rules holds -1 for a project no rule claims (the default team).
UPDATE project_owners SET valid_to = CAST($now AS TIMESTAMPTZ)
WHERE workspace_id = $workspace_id AND valid_to IS NULL
  AND project_id IN (SELECT unnest(CAST($project_ids AS VARCHAR[])));
INSERT INTO project_owners (workspace_id, project_id, team, sla_profile, rule, valid_from, valid_to)
SELECT $workspace_id, o.project_id, o.team, o.sla_profile, nullif(o.rule, -1), CAST($now AS TIMESTAMPTZ), NULL
FROM (SELECT unnest(CAST($project_ids AS VARCHAR[])) AS project_id,
             unnest(CAST($teams AS VARCHAR[])) AS team,
             unnest(CAST($profiles AS VARCHAR[])) AS sla_profile,
             unnest(CAST($rules AS INTEGER[])) AS rule) AS o;
