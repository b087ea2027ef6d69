-- The followed name of the workspace this key answered for (after workspace_binding.sql found no conflict).
UPDATE accounts SET workspace_label = $label WHERE workspace_id = $workspace_id;
