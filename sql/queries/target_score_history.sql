-- name: target_score_history
-- description: Each target's score per UTC day (last, lowest, highest; open and hidden issues), and before the
--   first sync from its finished scans (column source).
WITH observed AS (
    SELECT
        CAST(timezone('UTC', s.observed_at) AS DATE) AS day,
        s.project_id,
        s.target_id,
        arg_max(s.score, s.observed_at) AS score,
        arg_max(s.grade, s.observed_at) AS grade,
        min(s.score) AS min_score,
        max(s.score) AS max_score,
        arg_max(s.open_issues, s.observed_at) AS open_issues,
        arg_max(s.hidden_issues, s.observed_at) AS hidden_issues
    FROM score_snapshots AS s
    WHERE s.target_id IS NOT NULL
    GROUP BY ALL
),
reconstructed AS (
    SELECT r.day, r.project_id, r.target_id, r.score, r.grade, r.score AS min_score, r.score AS max_score,
           CAST(NULL AS INTEGER) AS open_issues, CAST(NULL AS INTEGER) AS hidden_issues
    FROM reconstructed_scores AS r
    JOIN first_observations AS f ON f.workspace_id = r.workspace_id AND r.day < f.first_observed_day
    WHERE r.target_id IS NOT NULL
)
SELECT
    h.day, p.name AS project, t.address, t.kind, h.score, h.grade, h.min_score, h.max_score, h.open_issues,
    h.hidden_issues, h.target_id, h.source
FROM (
    SELECT *, 'reconstructed' AS source FROM reconstructed
    UNION ALL
    SELECT *, 'observed' AS source FROM observed
) AS h
LEFT JOIN projects AS p ON p.id = h.project_id
LEFT JOIN targets AS t ON t.id = h.target_id
ORDER BY project, address, h.target_id, h.day;
