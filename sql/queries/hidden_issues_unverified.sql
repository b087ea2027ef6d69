-- name: hidden_issues_unverified
-- description: Sites whose ownership is not proved yet and how many issues the service hides on each; proving
--   them in the application reveals the details (and allows full audits).
SELECT
    t.hidden_issues,
    l.workspace,
    l.team,
    l.project,
    t.address,
    t.kind,
    t.last_scan_at,
    t.first_observed_at AS watched_since,
    t.id AS target_id
FROM target_states AS t
LEFT JOIN project_labels AS l ON l.project_id = t.project_id
WHERE t.site_unproved AND t.listed
ORDER BY coalesce(t.hidden_issues, 0) DESC, l.workspace, l.project, t.address;
