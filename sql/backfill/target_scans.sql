-- The finished scans of one workspace that carry a score: each sets its target's score from its end on.
DROP TABLE IF EXISTS _bf_scans;
CREATE TEMP TABLE _bf_scans AS
SELECT project_id, target_id, id AS scan_id, finished_at, score, grade
FROM scans
WHERE workspace_id = $workspace_id AND status = 'done' AND score IS NOT NULL AND finished_at IS NOT NULL;
