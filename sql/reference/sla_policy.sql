-- The SLA policy a metrics snapshot is computed with, so the cookbook's sla_breaches counts the same way.
DELETE FROM sla_policy;
INSERT INTO sla_policy (severity, days)
SELECT unnest(CAST($severities AS VARCHAR[])), unnest(CAST($days AS INTEGER[]));
