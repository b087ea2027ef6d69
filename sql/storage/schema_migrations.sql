-- The ledger of applied migrations: one row per numbered file of sql/migrations/.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name VARCHAR,
    applied_at TIMESTAMPTZ DEFAULT current_timestamp
);
