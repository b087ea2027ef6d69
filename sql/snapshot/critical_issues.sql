-- The part's newest open critical issues (`open_issues_now`), capped: only identifiers and bounded attributes,
-- never the title, evidence or location, so the opt-in info series can name an issue without leaking its
-- content.
SELECT
    i.workspace_id,
    o.team,
    i.project_id,
    i.project_name AS project,
    i.id AS issue_id,
    i.target_id,
    i.control_id,
    i.family,
    i.confidence,
    epoch(coalesce(i.first_seen_at, i.first_observed_at)) AS first_seen_at
FROM open_issues_now AS i
LEFT JOIN project_owners_now AS o ON o.workspace_id = i.workspace_id AND o.project_id = i.project_id
WHERE i.workspace_id = $workspace_id AND i.severity = 'critical'
ORDER BY coalesce(i.first_seen_at, i.first_observed_at) DESC, i.id
LIMIT $critical_limit;
