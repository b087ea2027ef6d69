-- One bad record of `$entity`: a row in ingest_warnings, once per distinct problem of each workspace.
INSERT INTO ingest_warnings (workspace_id, observed_at, entity, entity_id, field, value)
SELECT c.workspace_id, c.observed_at, $entity, $entity_id, $field, $value
FROM merge_context AS c
WHERE NOT EXISTS (
    SELECT 1 FROM ingest_warnings AS o
    WHERE o.workspace_id IS NOT DISTINCT FROM c.workspace_id
      AND entity = $entity AND entity_id IS NOT DISTINCT FROM $entity_id AND field = $field AND value = $value
);
