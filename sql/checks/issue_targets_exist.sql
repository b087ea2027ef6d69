-- Issues whose target is not in the history.
SELECT count(*)
FROM issues AS i
LEFT JOIN targets AS t ON t.id = i.target_id
WHERE t.id IS NULL;
