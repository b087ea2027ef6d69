-- name: target_score_history
-- description: Each target's score per UTC day from score_snapshots: the last score, grade, open and hidden
--   issues of the day, with the day's lowest and highest score.
SELECT
    CAST(timezone('UTC', s.observed_at) AS DATE) AS day,
    p.name AS project,
    t.address,
    t.kind,
    arg_max(s.score, s.observed_at) AS score,
    arg_max(s.grade, s.observed_at) AS grade,
    min(s.score) AS min_score,
    max(s.score) AS max_score,
    arg_max(s.open_issues, s.observed_at) AS open_issues,
    arg_max(s.hidden_issues, s.observed_at) AS hidden_issues,
    s.target_id
FROM score_snapshots AS s
LEFT JOIN projects AS p ON p.id = s.project_id
LEFT JOIN targets AS t ON t.id = s.target_id
WHERE s.target_id IS NOT NULL
GROUP BY ALL
ORDER BY project, address, s.target_id, day;
