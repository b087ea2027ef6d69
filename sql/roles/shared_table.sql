-- A table holding no workspace's rows (the vocabulary, the schema's own records): every role reads it.
GRANT SELECT ON {table} TO {role};
