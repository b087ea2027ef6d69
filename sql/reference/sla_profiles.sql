-- The ownership map's named SLA profiles (docs/ownership.md), days per severity; the default profile is
-- `sla_policy`. An upsert, as sla_policy.sql is: several workspaces' snapshots may write it at once.
DELETE FROM sla_profiles
WHERE profile || '/' || severity NOT IN (SELECT unnest(CAST($keys AS VARCHAR[])));
INSERT INTO sla_profiles (profile, severity, days)
SELECT p.profile, p.severity, p.days
FROM (SELECT unnest(CAST($profiles AS VARCHAR[])) AS profile,
             unnest(CAST($severities AS VARCHAR[])) AS severity,
             unnest(CAST($days AS INTEGER[])) AS days) AS p
ON CONFLICT (profile, severity) DO UPDATE SET days = excluded.days;
