-- Whether the list read now ($body_digest) is the answer the last full merge of it read, into rows that
-- nothing has changed since: both digests as merged_list_record.sql left them. No row, or either digest
-- differing (a value the service changed, a row another writer touched, a migration's new definition), and
-- the list is merged in full. {rows}: the digest of the list's rows as they are now
-- (pipelines/storage/upsert.py, `rows_digest`).
SELECT body_digest = $body_digest AND rows_digest = ({rows})
FROM merged_lists WHERE workspace_id = $workspace_id AND list_name = $list_name;
