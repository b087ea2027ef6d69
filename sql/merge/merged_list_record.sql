-- After a full merge of one list, in its transaction: the digest of the answer it read ($body_digest) and of
-- the rows it left ({rows}, which may read the recorded merge `m`: its moment is this sync's), for the next
-- merge's merged_list_check.sql. A merge that met a value breaking a rule, rejected or quarantined a record
-- ($body_digest NULL) records nothing: each of its reads is merged in full, and says so again.
DELETE FROM merged_lists WHERE workspace_id = $workspace_id AND list_name = $list_name;

INSERT INTO merged_lists (workspace_id, list_name, body_digest, rows_digest, observed_at)
SELECT CAST($workspace_id AS VARCHAR), CAST($list_name AS VARCHAR), CAST($body_digest AS VARCHAR), '',
       CAST($now AS TIMESTAMPTZ)
WHERE CAST($body_digest AS VARCHAR) IS NOT NULL;

UPDATE merged_lists AS m SET rows_digest = ({rows})
WHERE m.workspace_id = $workspace_id AND m.list_name = $list_name;
