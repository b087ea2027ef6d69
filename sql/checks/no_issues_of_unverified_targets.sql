-- Issues read while their site was unproved (the service hides those issues, so none should be).
SELECT count(*)
FROM issues AS i
JOIN targets AS t ON t.id = i.target_id
WHERE t.kind = 'domain' AND NOT t.verified AND t.removed_at IS NULL
  AND i.last_observed_at >= t.last_observed_at;
