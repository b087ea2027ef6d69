-- Target scores at each instant (the last finished scan before it), and project scores as the rounded
-- mean of the project's targets that had one. The contract gives no rule for a project's grade, so the
-- project rows carry none. A target's scans and the instants asked for are put in time order (at one moment
-- the instant first: it sees the scans finished before it), each scan starts a stretch, and an instant takes
-- the scan of the stretch it falls in.
DROP VIEW IF EXISTS _bf_scores_at;
CREATE TEMP VIEW _bf_scores_at AS
WITH asked AS (
    SELECT c.project_id, c.target_id, i.ts
    FROM _bf_instants AS i
    JOIN (SELECT project_id, target_id, min(finished_at) AS since FROM _bf_scans GROUP BY project_id, target_id)
        AS c ON i.ts > c.since
),
moments AS (
    SELECT project_id, target_id, finished_at AS ts, 1 AS kind, scan_id, score, grade
    FROM _bf_scans
    UNION ALL
    SELECT project_id, target_id, ts, 0, NULL, NULL, NULL
    FROM asked
),
stretched AS (
    SELECT *, sum(kind) OVER (PARTITION BY target_id ORDER BY ts, kind, scan_id
                              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS stretch
    FROM moments
),
targets_at AS (
    SELECT project_id, target_id, ts, kind,
           max(score) OVER (PARTITION BY target_id, stretch) AS score,
           max(grade) OVER (PARTITION BY target_id, stretch) AS grade,
           max(scan_id) OVER (PARTITION BY target_id, stretch) AS scan_id
    FROM stretched
)
SELECT project_id, target_id, ts, score, grade, scan_id FROM targets_at WHERE kind = 0
UNION ALL
SELECT project_id, NULL, ts, CAST(round(avg(score)) AS INTEGER), NULL, NULL
FROM targets_at
WHERE kind = 0
GROUP BY project_id, ts;
