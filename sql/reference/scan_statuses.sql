-- Scan statuses from pipelines/vocabulary.py; finished = the scan will not change any more.
DELETE FROM scan_statuses;
INSERT INTO scan_statuses
SELECT status, rank, list_contains($flagged, status)
FROM (SELECT unnest($names) AS status, unnest(range(1, len($names) + 1)) AS rank);
