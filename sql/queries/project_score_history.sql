-- name: project_score_history
-- description: Each project's score per UTC day (last, lowest, highest; open issues) from score_snapshots, and
--   before the first sync from its finished scans (column source).
WITH observed AS (
    SELECT
        CAST(timezone('UTC', s.observed_at) AS DATE) AS day,
        s.project_id,
        arg_max(s.score, s.observed_at) AS score,
        arg_max(s.grade, s.observed_at) AS grade,
        min(s.score) AS min_score,
        max(s.score) AS max_score,
        arg_max(s.open_issues, s.observed_at) AS open_issues
    FROM score_snapshots AS s
    WHERE s.target_id IS NULL
    GROUP BY ALL
),
open_before AS (
    SELECT workspace_id, project_id, day, CAST(sum(open_issues) AS INTEGER) AS open_issues
    FROM reconstructed_open_issues
    GROUP BY ALL
),
reconstructed AS (
    SELECT r.day, r.project_id, r.score, r.grade, r.score AS min_score, r.score AS max_score, o.open_issues
    FROM reconstructed_scores AS r
    JOIN first_observations AS f ON f.workspace_id = r.workspace_id AND r.day < f.first_observed_day
    LEFT JOIN open_before AS o ON o.workspace_id = r.workspace_id AND o.project_id = r.project_id AND o.day = r.day
    WHERE r.target_id IS NULL
)
SELECT h.day, p.name AS project, h.score, h.grade, h.min_score, h.max_score, h.open_issues, h.project_id, h.source
FROM (
    SELECT *, 'reconstructed' AS source FROM reconstructed
    UNION ALL
    SELECT *, 'observed' AS source FROM observed
) AS h
LEFT JOIN projects AS p ON p.id = h.project_id
ORDER BY project, h.project_id, h.day;
