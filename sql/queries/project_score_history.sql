-- name: project_score_history
-- description: Each project's score per UTC day (last, lowest, highest; open issues) from score_snapshots, and
--   before the first sync from its finished scans (column source).
-- The days are the `score_days` view's, which the target history reads too.
SELECT h.day, l.workspace, l.team, l.project, h.score, h.grade, h.min_score, h.max_score, h.open_issues, h.project_id,
       h.source
FROM score_days AS h
LEFT JOIN project_labels AS l ON l.project_id = h.project_id
WHERE h.target_id IS NULL
ORDER BY l.workspace, l.project, h.project_id, h.day;
