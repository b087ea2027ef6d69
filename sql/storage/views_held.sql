-- The views the history holds, by name: a name of the layer may still be a table's, on a history a migration
-- has not yet brought to the schema where a view took that name (reconstructed_scores at schema 20).
SELECT table_name
FROM information_schema.tables
WHERE table_schema = current_schema() AND table_catalog = current_database() AND table_type = 'VIEW';
