-- Target scores at each instant (the last finished scan before it), and project scores as the rounded
-- mean of the project's targets that had one. The contract gives no rule for a project's grade, so the
-- project rows carry none.
CREATE OR REPLACE TEMP VIEW _bf_scores_at AS
WITH targets_at AS (
    SELECT x.project_id, x.target_id, x.ts, s.score, s.grade, s.scan_id
    FROM (
        SELECT c.project_id, c.target_id, i.ts
        FROM _bf_instants AS i
        JOIN (SELECT project_id, target_id, min(finished_at) AS since FROM _bf_scans GROUP BY ALL) AS c
            ON i.ts > c.since
    ) AS x
    ASOF JOIN _bf_scans AS s ON s.target_id = x.target_id AND x.ts > s.finished_at
)
SELECT project_id, target_id, ts, score, grade, scan_id FROM targets_at
UNION ALL
SELECT project_id, NULL, ts, CAST(round(avg(score)) AS INTEGER), NULL, NULL
FROM targets_at
GROUP BY project_id, ts;
