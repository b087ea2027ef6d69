-- The part's newest open critical issues (`open_issues_now`), capped: only identifiers and bounded attributes,
-- never the title, evidence or location, so the opt-in info series can name an issue without leaking its
-- content.
SELECT
    workspace_id,
    project_id,
    project_name AS project,
    id AS issue_id,
    target_id,
    control_id,
    family,
    confidence,
    epoch(coalesce(first_seen_at, first_observed_at)) AS first_seen_at
FROM open_issues_now
WHERE workspace_id = $workspace_id AND severity = 'critical'
ORDER BY coalesce(first_seen_at, first_observed_at) DESC, id
LIMIT $critical_limit;
