-- scanwatch history, schema version 22: `scans` without its primary key, as migration 11 did for `issues`
-- and `issue_events`, for the same reason. The key kept an ART index over every scan the history ever held,
-- and a merge's insert holds the part it touches in memory: with random scan ids, nearly all of it. Scans
-- are the history's most numerous keyed rows (a small workspace's year is about 270 scans), so at a
-- thousand workspaces the index held about 24 MB of a sync's memory, on top of everything else the memory
-- limit covers (docs/benchmarks.md, "Where a first sync's peak goes"). Nothing reads through the key
-- (DuckDB answers from zone maps) and nothing can break it: the merge (merge/upsert.sql) updates the ids
-- the history holds and inserts only the others, from a stage with one row per id; the `scan_ids_unique`
-- check still watches it. The table is rebuilt as it was, column for column and NOT NULL for NOT NULL, and
-- its rows copied; the views over it bind by name.
-- DuckDB's alone: PostgreSQL keeps its key's B-tree index on disk, in shared buffers, and it serves the
-- merge's lookups by id.
CREATE TABLE scans_unkeyed (
    workspace_id      VARCHAR NOT NULL,
    id                VARCHAR NOT NULL,
    target_id         VARCHAR NOT NULL,
    project_id        VARCHAR NOT NULL,
    kind              VARCHAR,
    status            VARCHAR,
    score             INTEGER,
    grade             VARCHAR,
    coverage          DOUBLE,
    audit_fallback    BOOLEAN,
    reused            BOOLEAN,
    next_real_scan_at TIMESTAMPTZ,
    created_at        TIMESTAMPTZ,
    finished_at       TIMESTAMPTZ,
    first_observed_at TIMESTAMPTZ NOT NULL,
    last_observed_at  TIMESTAMPTZ NOT NULL
);
INSERT INTO scans_unkeyed SELECT * FROM scans;
DROP TABLE scans;
ALTER TABLE scans_unkeyed RENAME TO scans;
