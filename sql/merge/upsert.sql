-- Template, filled from the entity's column list by pipelines/storage/upsert.py.
-- Rows the history holds take the staged values of their mutable fields; the others are inserted.
-- UPDATE then INSERT rather than INSERT ... ON CONFLICT DO UPDATE, which DuckDB carries out as a delete and
-- an insert of every conflicting row.
UPDATE $table AS t SET $updates, last_observed_at = getvariable('now')$revive
FROM $stage AS s WHERE t.$key = s.$key;

INSERT INTO $table (workspace_id, $columns, first_observed_at, last_observed_at)
SELECT getvariable('workspace_id'), $columns, getvariable('now'), getvariable('now')
FROM $stage AS s
WHERE NOT EXISTS (SELECT 1 FROM $table AS t WHERE t.$key = s.$key);
