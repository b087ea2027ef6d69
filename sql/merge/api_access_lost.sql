-- The plan gate answered 402 (api_plan_required, api_trial_ended): the API no longer answers this workspace.
-- The next good account read sets it back.
UPDATE accounts SET api_access_allowed = false, last_observed_at = $now WHERE workspace_id = $workspace_id;
