-- scanwatch history, schema version 10: `score_days`, every project's and target's score per UTC day, one
-- definition for the cookbook's project_score_history and target_score_history (and your own queries).
--
-- A project row has target_id NULL. An observed day (source 'observed') is the day's score_snapshots: the
-- last score and grade, the lowest and highest, the last open and hidden counts. A day before the
-- workspace's first observation comes from the reconstruction (source 'reconstructed', migration 005): one
-- score for the whole day; a project's open issues are its reconstructed open issues of every severity, a
-- target's are unknown. Only adds a view: safe on any history, and applying it twice is harmless.
CREATE OR REPLACE VIEW score_days AS
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
    GROUP BY CAST(timezone('UTC', s.observed_at) AS DATE), s.project_id, s.target_id
),
open_before AS (
    SELECT workspace_id, project_id, day, CAST(sum(open_issues) AS INTEGER) AS open_issues
    FROM reconstructed_open_issues
    GROUP BY workspace_id, project_id, day
),
reconstructed AS (
    SELECT r.day, r.project_id, r.target_id, r.score, r.grade, r.score AS min_score, r.score AS max_score,
           CASE WHEN r.target_id IS NULL THEN o.open_issues END AS open_issues,
           CAST(NULL AS INTEGER) AS hidden_issues
    FROM reconstructed_scores AS r
    JOIN first_observations AS f ON f.workspace_id = r.workspace_id AND r.day < f.first_observed_day
    LEFT JOIN open_before AS o ON o.workspace_id = r.workspace_id AND o.project_id = r.project_id AND o.day = r.day
)
SELECT *, 'reconstructed' AS source FROM reconstructed
UNION ALL
SELECT *, 'observed' AS source FROM observed;
