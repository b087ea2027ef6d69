-- How many projects the list can honestly hold: the account's own counts, or what the history holds.
SELECT greatest(
    coalesce((SELECT max(greatest(coalesce(projects_used, 0), coalesce(projects_limit, 0))) FROM accounts
              WHERE workspace_id = $workspace_id), 0),
    (SELECT count(*) FROM project_states WHERE workspace_id = $workspace_id AND listed)
) AS projects;
