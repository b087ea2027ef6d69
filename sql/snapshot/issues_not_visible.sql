-- Workspace x reason grid of issues the service no longer shows (their site lost its proof, their target or
-- project was removed). They are in no open count; this says how many are set aside and why. Every reason is
-- present at 0 so a dashboard and an alert see the first one.
WITH reasons AS (
    SELECT * FROM (VALUES ('unverified'), ('target_removed'), ('project_removed')) v(reason)
    UNION SELECT DISTINCT hidden_reason FROM issues WHERE hidden_reason IS NOT NULL
),
counts AS (
    SELECT workspace_id, hidden_reason AS reason, count(*) AS n
    FROM issues WHERE hidden_reason IS NOT NULL GROUP BY ALL
)
SELECT a.workspace_id, r.reason, coalesce(c.n, 0) AS issues
FROM accounts a
CROSS JOIN reasons r
LEFT JOIN counts c ON c.workspace_id = a.workspace_id AND c.reason = r.reason
ORDER BY a.workspace_id, r.reason
