-- Whether the list read now ($body_digest) is the answer the last full merge of it read, into rows that
-- nothing has changed since: the answer's digest as merged_list_record.sql left it, and the digest of the
-- rows as that merge left them (`rows_digest`) beside the one of the rows now ({rows}, written from
-- pipelines/storage/upsert.py, `rows_digest`; `m` is the recorded merge). No row, or either digest differing
-- (a value the service changed, a row another writer touched, a new scanwatch's definition), and the list is
-- merged in full. `observed_at`: the recorded merge, whose samples an unchanged account's copy.
SELECT m.body_digest = $body_digest AS same_answer, m.rows_digest, ({rows}) AS rows_now, m.observed_at
FROM merged_lists AS m WHERE m.workspace_id = $workspace_id AND m.list_name = $list_name;
