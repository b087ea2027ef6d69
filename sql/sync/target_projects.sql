-- Each target's project, to file the scans a scheduled run started under it.
SELECT id, project_id FROM targets;
