-- Each project's periods of ownership, for readers of the past (the Prometheus backfill): a time t belongs to
-- the period with valid_from <= t < valid_to (NULL: unbounded). The first period reaches back without bound:
-- before ownership was first recorded a project shows its first recorded team, the one its live series began
-- with, so the backfilled year and the live series of a project are one series.
CREATE VIEW project_owner_periods AS
SELECT
    workspace_id,
    project_id,
    team,
    sla_profile,
    CASE WHEN row_number() OVER (PARTITION BY workspace_id, project_id ORDER BY valid_from) = 1 THEN NULL
         ELSE valid_from END AS valid_from,
    valid_to
FROM project_owners;
