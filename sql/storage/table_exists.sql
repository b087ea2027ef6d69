-- Whether the history has a table of that name (a history older than the migration that made it has not).
SELECT count(*) > 0 FROM information_schema.tables WHERE table_name = $name AND table_schema = current_schema();
