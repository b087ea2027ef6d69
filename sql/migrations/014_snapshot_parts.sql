-- scanwatch history, schema version 14: `snapshot_parts`, the metrics snapshot kept in the history itself.
-- With a PostgreSQL history, the runs (pods on any node) and the exporter share no disk: each workspace's run
-- replaces its part's row in one statement, and the exporter reads the rows with a read-only connection of its
-- own (pipelines/storage/destinations/impl/postgres/snapshot_store.py). A DuckDB history keeps its snapshot as
-- a folder of files beside it (the exporter never opens a DuckDB file a writer may hold), so there the table stays empty; both engines carry
-- it so that every history has one schema.
-- Only adds objects (IF NOT EXISTS): harmless twice.
-- `generation` comes from a sequence: every write of a part gives it a new, greater one, which is how the
-- exporter knows a part changed without reading it.
CREATE SEQUENCE IF NOT EXISTS snapshot_part_generations;

CREATE TABLE IF NOT EXISTS snapshot_parts (
    name        VARCHAR PRIMARY KEY,  -- the service's workspace id, or the followed name before it is known
    generation  BIGINT NOT NULL,
    written_at  TIMESTAMPTZ NOT NULL,
    document    VARCHAR NOT NULL      -- the part as compact JSON (pipelines/snapshot/format.py)
);
