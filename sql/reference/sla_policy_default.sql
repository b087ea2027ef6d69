-- The default SLA policy, for a history no metrics snapshot has written a policy into yet.
INSERT INTO sla_policy
SELECT unnest($severities), unnest($days)
WHERE NOT EXISTS (SELECT 1 FROM sla_policy);
