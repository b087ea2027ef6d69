-- The history's tables, and which column names the workspace of a row: `workspace_id` (with
-- `workspace_label` for a failed run recorded before its workspace's id was known), or the name of a
-- metrics snapshot part, or the key of a PostgreSQL writers' lock row; NULL for a table that holds no workspace's rows. With each, its catalog and
-- schema, so a temporary view of the same name can read it (`--workspace`, pipelines/storage/workspace_scope.py).
SELECT t.table_name,
       CASE WHEN bool_or(c.column_name = 'workspace_id') THEN 'workspace_id'
            WHEN t.table_name = 'snapshot_parts' THEN 'name'
            WHEN t.table_name = 'scanwatch_workspace_locks' THEN 'workspace_key' END AS workspace_column,
       bool_or(c.column_name = 'workspace_label') AS has_label,
       current_database() AS catalog,
       current_schema() AS schema_name
FROM information_schema.tables t
JOIN information_schema.columns c
  ON c.table_catalog = t.table_catalog AND c.table_schema = t.table_schema AND c.table_name = t.table_name
WHERE t.table_schema = current_schema() AND t.table_catalog = current_database() AND t.table_type = 'BASE TABLE'
GROUP BY t.table_name
ORDER BY t.table_name;
