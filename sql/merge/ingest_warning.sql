-- One bad record of `$entity`: a row in ingest_warnings, once per distinct problem of each workspace.
INSERT INTO ingest_warnings (workspace_id, observed_at, entity, entity_id, field, value)
SELECT c.workspace_id, c.observed_at, $entity, $entity_id, $field, $value
FROM merge_context AS c
WHERE NOT EXISTS (
    SELECT 1 FROM ingest_warnings AS o
    -- the merge's workspace, NULL included, in a form an index on the workspace answers (not every workspace's)
    WHERE (o.workspace_id = (SELECT workspace_id FROM merge_context)
           OR (o.workspace_id IS NULL AND (SELECT workspace_id FROM merge_context) IS NULL))
      AND entity = $entity AND entity_id IS NOT DISTINCT FROM $entity_id AND field = $field AND value = $value
);
