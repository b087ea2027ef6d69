-- The one sample of time to fix. The metrics snapshot's secscan_issue_time_to_fix_seconds histogram and the
-- cookbook's time_to_fix_by_project and time_to_fix_by_severity all read it, so /metrics and the cookbook
-- count the same issues the same way.
--
-- An issue is in the sample while the service says it is fixed and when (status `fixed`, `fixed_at` set):
-- one open again after a fix is not, its fixed_at no longer stands. The time runs from the service's
-- first_seen_at (scanwatch's first sighting when the service gave none) to fixed_at, never below zero.
-- `fixed_at` lets a reader take the fixes of a period (the history dashboard's time range).
CREATE VIEW fix_times AS
SELECT workspace_id, id AS issue_id, project_id, severity,
       greatest(epoch(fixed_at) - epoch(coalesce(first_seen_at, first_observed_at)), 0) AS seconds,
       fixed_at
FROM issues
WHERE status = 'fixed' AND fixed_at IS NOT NULL;
