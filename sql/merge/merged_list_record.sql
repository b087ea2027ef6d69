-- After a full merge of one list, in its transaction: the digest of the answer it read ($body_digest) and of
-- the rows it left ({rows}), for the next merge's merged_list_check.sql. A merge that warned about a record,
-- rejected or quarantined one ($body_digest NULL) records nothing: each of its reads is merged in full, and
-- says so again.
DELETE FROM merged_lists WHERE workspace_id = $workspace_id AND list_name = $list_name;

INSERT INTO merged_lists (workspace_id, list_name, body_digest, rows_digest, observed_at)
SELECT CAST($workspace_id AS VARCHAR), CAST($list_name AS VARCHAR), CAST($body_digest AS VARCHAR), ({rows}),
       CAST($now AS TIMESTAMPTZ)
WHERE CAST($body_digest AS VARCHAR) IS NOT NULL;
