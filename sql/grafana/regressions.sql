-- Issues that came back after a fix within the dashboard's time range (`reopenings`), what they are now, and the
-- team owning their project now.
SELECT
    max(r.reopened_at) AS last_reopened,
    count(*) AS times_reopened,
    r.severity,
    r.status AS status_now,
    l.workspace,
    l.team,
    l.project,
    r.title,
    r.address,
    r.location,
    r.issue_id
FROM reopenings AS r
JOIN project_labels AS l ON l.workspace_id = r.workspace_id AND l.project_id = r.project_id
WHERE l.workspace IN ($workspace) AND l.team IN ($team) AND $__timeFilter(r.reopened_at)
GROUP BY r.workspace_id, r.issue_id, r.severity, r.status, l.workspace, l.team, l.project, r.title, r.address, r.location
ORDER BY last_reopened DESC, r.issue_id
