-- Every part a whole snapshot holds (a whole build, or the first build of a folder of parts): each workspace
-- of the history, and each followed name whose runs failed before its workspace was ever read.
SELECT a.workspace_id, a.workspace_label AS label
FROM accounts AS a
UNION
SELECT CAST(NULL AS VARCHAR), r.workspace_label
FROM workspace_runs AS r
WHERE r.workspace_id IS NULL AND r.workspace_label IS NOT NULL
ORDER BY 1, 2;
