-- The workspace the history follows: the account read last.
SELECT workspace_id FROM accounts ORDER BY last_observed_at DESC LIMIT 1;
