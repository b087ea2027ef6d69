-- The checks of `scans`, one column each (named after its check), each counting the rows that break it, of
-- the run's workspace ($workspace_id; every workspace's with $every), as sql/checks/issues.sql.
--   scan_ids_unique: scan ids that appear on more than one row, each extra row counted.
SELECT count(*) - count(DISTINCT id) AS scan_ids_unique
FROM scans
WHERE $every OR workspace_id = $workspace_id;
