-- The events this merge wrote all carry its `now`: the counts it reports, not the whole table's.
SELECT event, count(*) FROM issue_events
WHERE observed_at = (SELECT observed_at FROM merge_context) AND workspace_id = (SELECT workspace_id FROM merge_context)
GROUP BY event;
