-- scanwatch history, schema version 16: ownership (docs/ownership.md). `project_owners` records which team
-- owned each project, on which SLA profile, and when: one row per project and period, written by each sync of
-- the workspace from the operator's map (SCANWATCH_OWNERSHIP_FILE), so the past stays with the team that
-- owned it then. `sla_profiles` holds the map's named SLA profiles (the default one is `sla_policy`).
-- Projects are few (hundreds per workspace), so the table is small and needs no key.
-- Only adds objects (IF NOT EXISTS): harmless twice.
CREATE TABLE IF NOT EXISTS project_owners (
    workspace_id VARCHAR NOT NULL,
    project_id   VARCHAR NOT NULL,
    team         VARCHAR NOT NULL,
    sla_profile  VARCHAR NOT NULL,        -- 'default': SCANWATCH_SLA_DAYS
    rule         INTEGER,                 -- the map's rules[N] that claimed it; NULL: the default team
    valid_from   TIMESTAMPTZ NOT NULL,    -- the sync that first saw this ownership
    valid_to     TIMESTAMPTZ              -- the sync that saw another one; NULL while current
);
CREATE TABLE IF NOT EXISTS sla_profiles (
    profile  VARCHAR NOT NULL,
    severity VARCHAR NOT NULL,
    days     INTEGER NOT NULL,            -- a severity a profile leaves out takes sla_policy's days
    PRIMARY KEY (profile, severity)
);
