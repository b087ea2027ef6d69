-- Reason grid of the part's issues the service no longer shows (their site lost its proof, their target or
-- project was removed). They are in no open count; this says how many are set aside and why. Every reason is
-- present at 0 so a dashboard and an alert see the first one.
WITH reasons AS (
    SELECT unnest(CAST($hidden_reasons AS VARCHAR[])) AS reason  -- pipelines/core/vocabulary.py's
    UNION SELECT DISTINCT hidden_reason FROM issues WHERE workspace_id = $workspace_id AND hidden_reason IS NOT NULL
),
counts AS (
    SELECT hidden_reason AS reason, count(*) AS n
    FROM issues
    WHERE workspace_id = $workspace_id AND hidden_reason IS NOT NULL
    GROUP BY hidden_reason
)
SELECT a.workspace_id, r.reason, coalesce(c.n, 0) AS issues
FROM accounts AS a
CROSS JOIN reasons AS r
LEFT JOIN counts AS c ON c.reason = r.reason
WHERE a.workspace_id = $workspace_id
ORDER BY r.reason;
