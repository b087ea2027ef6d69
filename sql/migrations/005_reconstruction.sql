-- scanwatch history, schema version 5: the past the service already held before scanwatch's first sync.
--
-- The service keeps a year of finished scans (30 days on Free) with their scores, and every issue's
-- first_seen_at and fixed_at. `scanwatch backfill` (and the end of a workspace's first sync) rebuilds
-- from them the days before scanwatch first observed the workspace. Those rows live in their own tables,
-- never in score_snapshots or issue_events, so nothing reconstructed can be mistaken for an observation
-- or page anyone. Only adds objects (IF NOT EXISTS, OR REPLACE): safe on any history, harmless twice.

-- One row per target (and per project, target_id NULL) per UTC day before the first observation: the
-- state at the end of the day. A target's score is its last finished scan's; a project's is the rounded
-- mean of its targets that had a score that day.
CREATE TABLE IF NOT EXISTS reconstructed_scores (
    workspace_id VARCHAR NOT NULL,
    day          DATE NOT NULL,
    project_id   VARCHAR NOT NULL,
    target_id    VARCHAR,
    score        INTEGER,
    grade        VARCHAR,
    scan_id      VARCHAR          -- the scan the target's score comes from (NULL on the project row)
);

-- Open issues per project and severity at the end of each UTC day before the first observation, from
-- first_seen_at and fixed_at. Cells with no open issue are kept at 0 once the project has any issue.
CREATE TABLE IF NOT EXISTS reconstructed_open_issues (
    workspace_id VARCHAR NOT NULL,
    day          DATE NOT NULL,
    project_id   VARCHAR NOT NULL,
    severity     VARCHAR NOT NULL,
    open_issues  INTEGER NOT NULL
);

-- One row per reconstruction that changed something (and for a workspace's first one, even empty), so a
-- re-run on the same history leaves every table as it was.
CREATE TABLE IF NOT EXISTS reconstruction_runs (
    workspace_id      VARCHAR NOT NULL,
    ran_at            TIMESTAMPTZ NOT NULL,
    first_observed_at TIMESTAMPTZ,
    first_day         DATE,
    last_day          DATE,
    score_rows        INTEGER NOT NULL,
    open_issue_rows   INTEGER NOT NULL,
    rows_changed      INTEGER NOT NULL
);

-- When scanwatch first observed each workspace is the view `first_observations` (sql/views/).
