-- Filled from the entity's column list by pipelines/storage/upsert.py: each name in braces is a slot, text written in
-- before the statement runs (names, column lists, the engine's row hash); `$name` would be a bound parameter.
-- Rows the history holds take the staged values of their mutable fields; the others are inserted.
-- UPDATE then INSERT rather than INSERT ... ON CONFLICT DO UPDATE, which DuckDB carries out as a delete and
-- an insert of every conflicting row.
UPDATE {table} AS t SET {updates}, last_observed_at = c.observed_at{revive}
FROM {stage} AS s, merge_context AS c WHERE t.{key} = s.{key};

INSERT INTO {table} (workspace_id, {columns}, first_observed_at, last_observed_at)
SELECT c.workspace_id, {staged}, c.observed_at, c.observed_at
FROM {stage} AS s, merge_context AS c
WHERE NOT EXISTS (SELECT 1 FROM {table} AS t WHERE t.{key} = s.{key});
