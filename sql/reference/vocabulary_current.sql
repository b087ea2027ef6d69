-- Whether the history's vocabulary tables already hold pipelines/core/vocabulary.py's definition (and an SLA
-- policy): opening the history then writes nothing. The parameters of reference/vocabulary.sql but the SLA.
SELECT coalesce((SELECT array_agg(severity ORDER BY rank) FROM severities) = CAST($severities AS VARCHAR[]), false)
   AND coalesce((SELECT array_agg(status ORDER BY rank) FROM issue_statuses)
                = CAST($issue_statuses AS VARCHAR[]), false)
   AND coalesce((SELECT array_agg(status ORDER BY rank) FROM issue_statuses WHERE dismissed)
                = CAST($dismissed AS VARCHAR[]), false)
   AND coalesce((SELECT array_agg(status ORDER BY rank) FROM scan_statuses) = CAST($scan_statuses AS VARCHAR[]), false)
   AND coalesce((SELECT array_agg(status ORDER BY rank) FROM scan_statuses WHERE finished)
                = CAST($finished AS VARCHAR[]), false)
   AND EXISTS (SELECT 1 FROM sla_policy)
