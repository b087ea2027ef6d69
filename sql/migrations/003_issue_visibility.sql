-- scanwatch history, schema version 3: issues the service stops listing, and scans that vanish.
--
-- An issue list is complete for its project, so a stored issue that is no longer listed has a reason: its
-- site lost its proof (the service hides its issues and gives only the target's hidden_issues), its target
-- was removed, or its project was removed. Such an issue is neither fixed (the service did not say so) nor
-- open in any count: `hidden_reason` says why (`unverified`, `target_removed`, `project_removed`) and
-- `hidden_at` since when; `issue_events` records `hidden` and `visible_again`. Its status is kept as it was,
-- so an issue listed again with the same id returns to that status without a `reopened`.
--
-- A queued scan whose scan, target or project now answers 404 is settled: it gets a `scans_gone` row and
-- nothing polls it again. Its `scans` row stays as last seen: deletion on the service never deletes history.
--
-- Only adds nullable columns and a table, so it is safe on any existing history.
ALTER TABLE issues ADD COLUMN IF NOT EXISTS hidden_reason VARCHAR;
ALTER TABLE issues ADD COLUMN IF NOT EXISTS hidden_at TIMESTAMPTZ;

CREATE TABLE IF NOT EXISTS scans_gone (
    workspace_id VARCHAR,
    scan_id      VARCHAR PRIMARY KEY,
    project_id   VARCHAR,
    gone_at      TIMESTAMPTZ NOT NULL,
    answered     VARCHAR NOT NULL  -- what said so: `scan`, `target` or `project` answering 404
);

-- `open_issues_now` leaves hidden issues out: sql/views/open_issues_now.sql.
