-- The SLA policy a metrics snapshot is computed with, so the cookbook's sla_breaches counts the same way.
-- An upsert, not a delete then an insert: on PostgreSQL the snapshots of several workspaces write it at once,
-- and a second writer's insert met the rows the first had just inserted (duplicate key on sla_policy_pkey);
-- now a writer waits for the other's row and updates it.
DELETE FROM sla_policy WHERE severity NOT IN (SELECT unnest(CAST($severities AS VARCHAR[])));
INSERT INTO sla_policy (severity, days)
SELECT unnest(CAST($severities AS VARCHAR[])), unnest(CAST($days AS INTEGER[]))
ON CONFLICT (severity) DO UPDATE SET days = excluded.days;
