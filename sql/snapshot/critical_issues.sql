-- The newest open critical issues, capped: only identifiers and bounded attributes, never the title,
-- evidence or location, so the opt-in info series can name an issue without leaking its content.
SELECT
    i.workspace_id,
    i.project_id,
    coalesce(p.name, p.id) AS project,
    i.id AS issue_id,
    i.target_id,
    i.control_id,
    i.family,
    i.confidence,
    epoch(coalesce(i.first_seen_at, i.first_observed_at)) AS first_seen_at
FROM issues i
JOIN projects p ON p.id = i.project_id AND p.removed_at IS NULL
WHERE i.status = 'open' AND i.hidden_reason IS NULL AND i.severity = 'critical'
ORDER BY coalesce(i.first_seen_at, i.first_observed_at) DESC, i.id
LIMIT $critical_limit
