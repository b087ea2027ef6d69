-- scanwatch history, schema version 19: `merged_lists`, what the last merge of a workspace's account and of
-- its project list read and wrote, so that an unchanged list is marked seen without being staged again
-- (pipelines/storage/merge.py, "An unchanged list"). Two digests per list: of the service's answer as the
-- merge read it, and of the rows the merge left (sql/merge/merged_list_check.sql). A row is only ever a
-- shortcut: without it, or with either digest differing, the list is merged in full.
-- Only adds objects (IF NOT EXISTS): harmless twice.
CREATE TABLE IF NOT EXISTS merged_lists (
    workspace_id VARCHAR NOT NULL,
    list_name    VARCHAR NOT NULL,        -- 'account' (GET /account), 'projects' (GET /projects)
    body_digest  VARCHAR NOT NULL,        -- SHA-256 of the answer, with the merge's own definition
    rows_digest  VARCHAR NOT NULL,        -- the rows' count and hash sum per table, after the merge
    observed_at  TIMESTAMPTZ NOT NULL,    -- the sync whose full merge recorded it
    PRIMARY KEY (workspace_id, list_name)
);
