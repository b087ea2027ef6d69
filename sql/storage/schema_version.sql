-- The history's schema version: the highest migration applied.
SELECT coalesce(max(version), 0) FROM schema_migrations;
