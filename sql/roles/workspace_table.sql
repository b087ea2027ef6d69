-- A table holding workspace rows: row-level security on (its owner, the writer, is not subject to it), every
-- row for the all-workspace reader, one workspace's rows for its role.
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS scanwatch_every_workspace ON {table};
CREATE POLICY scanwatch_every_workspace ON {table} FOR SELECT TO {reader} USING (true);
DROP POLICY IF EXISTS {policy} ON {table};
CREATE POLICY {policy} ON {table} FOR SELECT TO {role} USING ({condition});
GRANT SELECT ON {table} TO {role};
