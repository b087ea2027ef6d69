-- Severities worst first, from pipelines/vocabulary.py (rank 1 is the worst).
DELETE FROM severities;
INSERT INTO severities
SELECT unnest($names), unnest(range(1, len($names) + 1));
