-- Recorded in the migration's own transaction, so a migration is applied and recorded, or neither.
INSERT INTO schema_migrations (version, name) VALUES ($version, $name);
