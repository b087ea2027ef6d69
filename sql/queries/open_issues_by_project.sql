-- name: open_issues_by_project
-- description: Open issues now per project and severity, with the project's workspace, current score and grade.
--
-- Open issues are `open_issues_now`'s. One column per severity, worst first, as the `severities` table lists
-- them (pipelines/core/vocabulary.py). Projects with the most of the worst come first.
WITH listed AS (
    SELECT l.workspace, l.team, l.project_id, l.project, p.score, p.grade
    FROM project_labels AS l
    JOIN projects AS p ON p.id = l.project_id
    WHERE l.listed
),
open_issues AS (
    SELECT p.*, o.id AS issue_id, o.severity
    FROM listed AS p
    LEFT JOIN open_issues_now AS o ON o.project_id = p.project_id
),
counts AS (
    SELECT project_id, severity, count(issue_id) AS issues FROM open_issues GROUP BY project_id, severity
),
-- The sort key: the counts worst severity first, each padded to the same width, so text order is count order.
per_project AS (
    SELECT t.project_id, t.total,
           string_agg(lpad(CAST(coalesce(c.issues, 0) AS VARCHAR), 12, '0'), ',' ORDER BY s.rank) AS worst_first
    FROM (SELECT project_id, count(issue_id) AS total FROM open_issues GROUP BY project_id) AS t
    CROSS JOIN severities AS s
    LEFT JOIN counts AS c ON c.project_id = t.project_id AND c.severity = s.severity
    GROUP BY t.project_id, t.total
)
-- One column per severity, worst first (`scanwatch sql` writes the comment out once per severity).
SELECT
    o.workspace,
    o.team,
    o.project,
    o.score,
    o.grade,
    /* each severity: count(o.issue_id) FILTER (WHERE o.severity = '{severity}') AS "{severity}", */
    t.total,
    o.project_id
FROM open_issues AS o
JOIN per_project AS t ON t.project_id = o.project_id
GROUP BY o.workspace, o.team, o.project, o.score, o.grade, t.total, o.project_id, t.worst_first
ORDER BY t.worst_first DESC, t.total DESC, o.workspace, o.project, o.project_id;
