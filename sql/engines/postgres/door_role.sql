-- What the read door's connection could do beyond reading the history: be a superuser, a member of the roles
-- that reach the server's files, programs, other sessions or every table, the owner of a table, or allowed to
-- write one. Every role it may become counts: the login role (`session_user`: a statement can always go back
-- to it with `set_config('role', 'none', ...)`, whatever role the URL's options or PGOPTIONS set first), the
-- current one, those they inherit and those they may SET ROLE to. Every table of the database counts, in
-- every schema, not only those the search path finds. The door opens only for a role with none of them
-- (docs/postgres.md, "Roles: who gets what").
WITH reachable AS (
    SELECT oid, rolname, rolsuper FROM pg_roles
    WHERE pg_has_role(session_user, oid, 'MEMBER') OR pg_has_role(current_user, oid, 'MEMBER')
),
history AS (
    SELECT c.oid, CASE WHEN n.nspname = current_schema() THEN c.relname::text
                       ELSE n.nspname || '.' || c.relname END AS name, c.relowner
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p')
      AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%'
)
SELECT session_user,
       EXISTS (SELECT 1 FROM reachable WHERE rolsuper) AS superuser,
       ARRAY(SELECT rolname::text FROM reachable
             WHERE rolname IN ('pg_read_server_files', 'pg_write_server_files', 'pg_execute_server_program',
                               'pg_write_all_data', 'pg_signal_backend')
             ORDER BY 1) AS server_roles,
       ARRAY(SELECT h.name FROM history h WHERE h.relowner IN (SELECT oid FROM reachable) ORDER BY 1) AS owned,
       ARRAY(SELECT h.name FROM history h
             WHERE EXISTS (SELECT 1 FROM reachable r
                           WHERE has_table_privilege(r.oid, h.oid, 'INSERT, UPDATE, DELETE, TRUNCATE'))
             ORDER BY 1) AS writable;
