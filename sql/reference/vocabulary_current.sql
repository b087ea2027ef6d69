-- Whether the history's vocabulary tables already hold pipelines/vocabulary.py's definition (and an SLA
-- policy): opening the history then writes nothing. The parameters of reference/vocabulary.sql but the SLA.
SELECT coalesce((SELECT list(severity ORDER BY rank) FROM severities) = $severities, false)
   AND coalesce((SELECT list(status ORDER BY rank) FROM issue_statuses) = $issue_statuses, false)
   AND coalesce((SELECT list(status ORDER BY rank) FROM issue_statuses WHERE dismissed) = $dismissed, false)
   AND coalesce((SELECT list(status ORDER BY rank) FROM scan_statuses) = $scan_statuses, false)
   AND coalesce((SELECT list(status ORDER BY rank) FROM scan_statuses WHERE finished) = $finished, false)
   AND EXISTS (SELECT 1 FROM sla_policy)
