-- name: target_score_history
-- description: Each target's score per UTC day (last, lowest, highest; open and hidden issues), and before the
--   first sync from its finished scans (column source).
-- The days are the `score_days` view's, which the project history reads too.
SELECT
    h.day, l.workspace, l.team, l.project, t.address, t.kind, h.score, h.grade, h.min_score, h.max_score, h.open_issues,
    h.hidden_issues, h.target_id, h.source
FROM score_days AS h
LEFT JOIN project_labels AS l ON l.project_id = h.project_id
LEFT JOIN targets AS t ON t.id = h.target_id
WHERE h.target_id IS NOT NULL
ORDER BY l.workspace, l.project, t.address, h.target_id, h.day;
