-- Each open and visible issue's age and SLA state. The clock starts at the service's first_seen_at
-- (scanwatch's first sighting when the service gave none); the days are those of the SLA profile of the
-- issue's project now (`project_owners_now`, docs/ownership.md): the profile's own (`sla_profiles`), else the
-- default profile's, `sla_policy` (written by each metrics snapshot; info issues have none). An issue breaches its SLA once its age is over the policy's
-- days, and is due soon in the last quarter of that window, not yet breached. Times are Unix seconds, so a
-- reader compares its own clock (the snapshot's time, or now()) with `breach_at` and `due_soon_at`:
--   breached: clock > breach_at;  due soon: clock > due_soon_at AND clock <= breach_at;  age: clock - opened_at.
-- `secscan_issues_sla_breached`, `secscan_issues_sla_due_soon`, `SecscanSlaBreached`, the cookbook's
-- `sla_breaches` and the history dashboard all read it; the issue's project, text and first sighting come
-- along, so a reader that lists breaches reads the open issues once (a second pass over `open_issues_now`,
-- joined back by id, is quadratic on PostgreSQL when the planner has no statistics of the small tables yet).
CREATE VIEW issue_sla AS
SELECT
    o.workspace_id,
    o.id AS issue_id,
    o.project_id,
    o.severity,
    epoch(coalesce(o.first_seen_at, o.first_observed_at)) AS opened_at,
    coalesce(p.days, s.days) AS sla_days,
    epoch(coalesce(o.first_seen_at, o.first_observed_at)) + coalesce(p.days, s.days) * 86400 AS breach_at,
    epoch(coalesce(o.first_seen_at, o.first_observed_at)) + coalesce(p.days, s.days) * 86400 * 0.75 AS due_soon_at,
    o.project_name AS project,
    w.team,
    w.sla_profile,
    o.first_seen_at,
    o.title,
    o.address,
    o.location
FROM open_issues_now AS o
LEFT JOIN sla_policy AS s ON s.severity = o.severity
LEFT JOIN project_owners_now AS w ON w.workspace_id = o.workspace_id AND w.project_id = o.project_id
LEFT JOIN sla_profiles AS p ON p.profile = w.sla_profile AND p.severity = o.severity AND s.days IS NOT NULL;
