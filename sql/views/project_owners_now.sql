-- Each project's team and SLA profile now: its current row of `project_owners` (docs/ownership.md), written by
-- each sync of its workspace from the ownership map. A project no sync has given an owner yet (a history from
-- before ownership, or a sync that stopped before its snapshot) is `unowned`, with no profile: its issues take
-- the default profile's days (`sla_policy`), as every reader joins `sla_profiles` on the profile and falls back.
CREATE VIEW project_owners_now AS
SELECT
    p.workspace_id,
    p.id AS project_id,
    coalesce(o.team, 'unowned') AS team,
    o.sla_profile,
    o.rule,  -- NULL: no rule of the map claims it (it has the default team)
    o.valid_from AS owned_since
FROM projects AS p
LEFT JOIN project_owners AS o
  ON o.workspace_id = p.workspace_id AND o.project_id = p.id AND o.valid_to IS NULL;
