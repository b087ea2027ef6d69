-- The vocabulary of pipelines/core/vocabulary.py as tables, rewritten when the history is opened for writing and
-- its copy differs (reference/vocabulary_current.sql).
--
-- Severities worst first (rank 1 is the worst).
DELETE FROM severities;
INSERT INTO severities (severity, rank)
SELECT v.severity, CAST(v.rank AS INTEGER)
FROM unnest(CAST($severities AS VARCHAR[])) WITH ORDINALITY AS v(severity, rank);

-- Issue statuses; dismissed = marked by a person.
DELETE FROM issue_statuses;
INSERT INTO issue_statuses (status, rank, dismissed)
SELECT v.status, CAST(v.rank AS INTEGER), v.status = ANY(CAST($dismissed AS VARCHAR[]))
FROM unnest(CAST($issue_statuses AS VARCHAR[])) WITH ORDINALITY AS v(status, rank);

-- Scan statuses; finished = the scan will not change any more.
DELETE FROM scan_statuses;
INSERT INTO scan_statuses (status, rank, finished)
SELECT v.status, CAST(v.rank AS INTEGER), v.status = ANY(CAST($finished AS VARCHAR[]))
FROM unnest(CAST($scan_statuses AS VARCHAR[])) WITH ORDINALITY AS v(status, rank);

-- The default SLA policy, for a history no metrics snapshot has written a policy into yet
-- (sql/reference/sla_policy.sql writes the one a snapshot uses).
INSERT INTO sla_policy (severity, days)
SELECT unnest(CAST($sla_severities AS VARCHAR[])), unnest(CAST($sla_days AS INTEGER[]))
WHERE NOT EXISTS (SELECT 1 FROM sla_policy);
