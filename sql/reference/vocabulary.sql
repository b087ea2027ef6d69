-- The vocabulary of pipelines/vocabulary.py as tables, rewritten when the history is opened for writing and
-- its copy differs (reference/vocabulary_current.sql).
--
-- Severities worst first (rank 1 is the worst).
DELETE FROM severities;
INSERT INTO severities
SELECT unnest($severities), unnest(range(1, len($severities) + 1));

-- Issue statuses; dismissed = marked by a person.
DELETE FROM issue_statuses;
INSERT INTO issue_statuses
SELECT status, rank, list_contains($dismissed, status)
FROM (SELECT unnest($issue_statuses) AS status, unnest(range(1, len($issue_statuses) + 1)) AS rank);

-- Scan statuses; finished = the scan will not change any more.
DELETE FROM scan_statuses;
INSERT INTO scan_statuses
SELECT status, rank, list_contains($finished, status)
FROM (SELECT unnest($scan_statuses) AS status, unnest(range(1, len($scan_statuses) + 1)) AS rank);

-- The default SLA policy, for a history no metrics snapshot has written a policy into yet
-- (sql/reference/sla_policy.sql writes the one a snapshot uses).
INSERT INTO sla_policy
SELECT unnest($sla_severities), unnest($sla_days)
WHERE NOT EXISTS (SELECT 1 FROM sla_policy);
