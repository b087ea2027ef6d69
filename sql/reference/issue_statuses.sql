-- Issue statuses from pipelines/vocabulary.py; dismissed = marked by a person.
DELETE FROM issue_statuses;
INSERT INTO issue_statuses
SELECT status, rank, list_contains($flagged, status)
FROM (SELECT unnest($names) AS status, unnest(range(1, len($names) + 1)) AS rank);
