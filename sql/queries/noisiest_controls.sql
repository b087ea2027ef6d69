-- name: noisiest_controls
-- description: The 20 checks (control_id) behind the most issues ever seen, with how many are open and where.
SELECT
    control_id,
    min(family) AS family,
    count(*) AS issues,
    count(*) FILTER (WHERE status = 'open' AND hidden_reason IS NULL) AS open_issues,
    count(DISTINCT project_id) AS projects,
    count(DISTINCT target_id) AS targets,
    min(title) AS example_title
FROM issues
GROUP BY control_id
ORDER BY issues DESC, open_issues DESC, control_id
LIMIT 20;
