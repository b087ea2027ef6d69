-- scanwatch history, schema version 11: `issues` and `issue_events` without primary keys. Each key kept an
-- ART index over every row the history ever held, and DuckDB holds the part of it an insert touches in
-- memory: with random issue ids that is nearly all of it, so a sync's memory grew with the whole history
-- (about 35 MB per 400k issues and as much again per 400k events) and, past its memory_limit, a large
-- workspace's sync would fail. Nothing reads through the keys (DuckDB answers from zone maps, see
-- migration 002) and nothing can break them: the merge updates the ids the history holds and inserts only
-- the others, from a stage with one row per id, and writes at most one event of a kind per issue at its
-- own `now`; the `issue_ids_unique` check still watches the first. Both tables are rebuilt as they were,
-- column for column and NOT NULL for NOT NULL, and their rows copied; the views over them bind by name.
-- DuckDB's alone: PostgreSQL keeps its keys' B-tree indexes on disk, in shared buffers, not in scanwatch's
-- memory, and they serve the merge's lookups by id; its views bind to a table, not a name, and would not let
-- it be dropped.
CREATE TABLE issues_unkeyed (
    workspace_id      VARCHAR NOT NULL,
    id                VARCHAR NOT NULL,
    project_id        VARCHAR NOT NULL,
    target_id         VARCHAR NOT NULL,
    address           VARCHAR,
    control_id        VARCHAR,
    family            VARCHAR,
    severity          VARCHAR,
    confidence        VARCHAR,
    status            VARCHAR,
    title             VARCHAR,
    explanation       VARCHAR,
    detail            VARCHAR,
    location          VARCHAR,
    file              VARCHAR,
    line              INTEGER,
    "commit"          VARCHAR,
    evidence          VARCHAR,
    fix_unlocked      BOOLEAN,
    status_reason     VARCHAR,
    marked_by         VARCHAR,
    first_seen_at     TIMESTAMPTZ,
    last_seen_at      TIMESTAMPTZ,
    fixed_at          TIMESTAMPTZ,
    first_observed_at TIMESTAMPTZ NOT NULL,
    last_observed_at  TIMESTAMPTZ NOT NULL,
    hidden_reason     VARCHAR,
    hidden_at         TIMESTAMPTZ
);
INSERT INTO issues_unkeyed SELECT * FROM issues;
DROP TABLE issues;
ALTER TABLE issues_unkeyed RENAME TO issues;

CREATE TABLE issue_events_unkeyed (
    workspace_id VARCHAR NOT NULL,
    issue_id     VARCHAR NOT NULL,
    project_id   VARCHAR NOT NULL,
    target_id    VARCHAR,
    severity     VARCHAR,
    observed_at  TIMESTAMPTZ NOT NULL,
    event        VARCHAR NOT NULL,
    from_value   VARCHAR,
    to_value     VARCHAR
);
INSERT INTO issue_events_unkeyed SELECT * FROM issue_events;
DROP TABLE issue_events;
ALTER TABLE issue_events_unkeyed RENAME TO issue_events;
