-- One bad record of `$entity`: a row in ingest_warnings, once per distinct problem.
INSERT INTO ingest_warnings (workspace_id, observed_at, entity, entity_id, field, value)
SELECT getvariable('workspace_id'), getvariable('now'), $entity, $entity_id, $field, $value
WHERE NOT EXISTS (
    SELECT 1 FROM ingest_warnings
    WHERE entity = $entity AND entity_id IS NOT DISTINCT FROM $entity_id AND field = $field AND value = $value
);
