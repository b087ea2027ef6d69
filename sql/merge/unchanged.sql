-- Filled from the entity's column list by pipelines/storage/upsert.py: each name in braces is a slot, text written in
-- before the statement runs (names, column lists, the engine's row hash); `$name` would be a bound parameter.
-- Staged rows the history already holds exactly (the same hash over every API field, typed) are only marked
-- seen, in place, and leave the stage: a re-read list is mostly unchanged, and rewriting those rows would
-- cost as much as the whole list. Only `id` and a 64-bit hash cross the join, so its memory stays small.
-- The row hash is the engine's (DuckDB's hash(), PostgreSQL's hashtextextended() of the row as text).
DROP TABLE IF EXISTS seen_unchanged;
CREATE TEMP TABLE seen_unchanged AS
SELECT s.{key} FROM (SELECT {key}, {row_hash} AS h FROM {stage}) AS s
JOIN (SELECT {key}, {row_hash} AS h FROM {table} WHERE {key} IN (SELECT {key} FROM {stage})) AS t
  ON t.{key} = s.{key} AND t.h = s.h;

UPDATE {table} SET last_observed_at = (SELECT observed_at FROM merge_context){revive}
WHERE {key} IN (SELECT {key} FROM seen_unchanged);

DELETE FROM {stage} WHERE {key} IN (SELECT {key} FROM seen_unchanged);

DROP TABLE seen_unchanged;
