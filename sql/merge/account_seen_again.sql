-- GET /account answered what the last full merge read, into rows nothing changed since
-- (merged_list_check.sql): the account is marked seen, and each quota gets this sync's sample, the values that
-- merge wrote at $merged_at (none if it found none), as merge/account.sql would have written them.
UPDATE accounts SET last_observed_at = (SELECT observed_at FROM merge_context),
                    service_version = (SELECT service_version FROM merge_context)
WHERE workspace_id = (SELECT workspace_id FROM merge_context);

INSERT INTO quota_snapshots (workspace_id, observed_at, quota, "limit", used, remaining, period_start, period_end)
SELECT q.workspace_id, c.observed_at, q.quota, q."limit", q.used, q.remaining, a.period_start, a.period_end
FROM quota_snapshots AS q
JOIN accounts AS a ON a.workspace_id = q.workspace_id
CROSS JOIN merge_context AS c
WHERE q.workspace_id = c.workspace_id
  AND q.observed_at = CAST($merged_at AS TIMESTAMPTZ);

-- This sync's quota rows, the count the merge reports (as merge/account.sql ends).
SELECT count(*) FROM quota_snapshots
WHERE observed_at = (SELECT observed_at FROM merge_context) AND workspace_id = (SELECT workspace_id FROM merge_context);
