-- The history's tables that carry workspace_id: each is shown through a view of one workspace's rows, which
-- names the table by its catalog and schema (the view takes the table's name).
SELECT table_name, bool_or(column_name = 'workspace_label') AS has_label, current_database() AS catalog,
       current_schema() AS schema_name
FROM information_schema.columns
WHERE table_schema = current_schema() AND table_catalog = current_database()
  AND table_name IN (SELECT table_name FROM information_schema.tables
                     WHERE table_schema = current_schema() AND table_catalog = current_database()
                       AND table_type = 'BASE TABLE')
GROUP BY table_name
HAVING bool_or(column_name = 'workspace_id')
ORDER BY table_name;
