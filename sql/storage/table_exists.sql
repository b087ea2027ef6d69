-- Whether the history has a table of that name (a history older than the migration that made it has not). The
-- catalog is named: a process may have other histories attached to the same DuckDB (storage/engines).
SELECT count(*) > 0 FROM information_schema.tables
WHERE table_name = $name AND table_schema = current_schema() AND table_catalog = current_database();
