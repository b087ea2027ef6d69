-- The SLA policy the history holds: a snapshot built with the same one writes nothing (every workspace's
-- run builds one, and the policy changes only when SCANWATCH_SLA_DAYS does).
SELECT severity, days FROM sla_policy;
