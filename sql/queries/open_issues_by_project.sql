-- name: open_issues_by_project
-- description: Open issues now per project and severity, with the project's current score and grade.
--
-- One column per severity, worst first, as the `severities` table lists them (pipelines/vocabulary.py).
-- Projects with the most of the worst come first.
WITH open_issues AS (
    SELECT p.id AS project_id, p.name AS project, p.score, p.grade, i.id AS issue_id, i.severity
    FROM projects AS p
    LEFT JOIN issues AS i ON i.project_id = p.id AND i.status = 'open' AND i.hidden_reason IS NULL
    WHERE p.removed_at IS NULL
),
counts AS (
    SELECT project_id, severity, count(issue_id) AS issues FROM open_issues GROUP BY ALL
),
-- The sort key: the counts worst severity first, compared as a list.
per_project AS (
    SELECT t.project_id, t.total, list(coalesce(c.issues, 0) ORDER BY s.rank) AS worst_first
    FROM (SELECT project_id, count(issue_id) AS total FROM open_issues GROUP BY project_id) AS t
    LEFT JOIN severities AS s ON TRUE
    LEFT JOIN counts AS c ON c.project_id = t.project_id AND c.severity = s.severity
    GROUP BY t.project_id, t.total
)
SELECT project, score, grade, * EXCLUDE (project, score, grade, total, project_id, worst_first), total, project_id
FROM (
    PIVOT (SELECT o.*, t.total, t.worst_first FROM open_issues AS o JOIN per_project AS t USING (project_id))
    ON severity IN (SELECT severity FROM severities ORDER BY rank)
    USING count(issue_id)
    GROUP BY project, score, grade, total, project_id, worst_first
)
ORDER BY worst_first DESC, total DESC, project, project_id;
