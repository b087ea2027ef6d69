-- The named SLA profiles the history holds: a sync whose map has the same ones writes nothing.
SELECT profile, severity, days FROM sla_profiles ORDER BY profile, severity;
