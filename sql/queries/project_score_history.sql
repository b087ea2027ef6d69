-- name: project_score_history
-- description: Each project's score per UTC day from score_snapshots: the last score, grade and open issues of
--   the day, with the day's lowest and highest score.
SELECT
    CAST(timezone('UTC', s.observed_at) AS DATE) AS day,
    p.name AS project,
    arg_max(s.score, s.observed_at) AS score,
    arg_max(s.grade, s.observed_at) AS grade,
    min(s.score) AS min_score,
    max(s.score) AS max_score,
    arg_max(s.open_issues, s.observed_at) AS open_issues,
    s.project_id
FROM score_snapshots AS s
LEFT JOIN projects AS p ON p.id = s.project_id
WHERE s.target_id IS NULL
GROUP BY ALL
ORDER BY project, s.project_id, day;
