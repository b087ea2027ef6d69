-- What the role of the read door's connection could do beyond reading the history: a superuser, a member of
-- the roles that reach the server's files and programs, the owner of a history table, or a role that may
-- write one. The door opens only for a role with none of them (docs/postgres.md, "Roles: who gets what").
SELECT current_user,
       r.rolsuper,
       ARRAY(SELECT g FROM unnest(ARRAY['pg_read_server_files', 'pg_write_server_files',
                                        'pg_execute_server_program']) AS g
             WHERE pg_has_role(current_user, g, 'MEMBER') ORDER BY g) AS server_roles,
       ARRAY(SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
               AND pg_has_role(current_user, c.relowner, 'USAGE') ORDER BY 1) AS owned,
       ARRAY(SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
               AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE') ORDER BY 1) AS writable
FROM pg_roles r
WHERE r.rolname = current_user;
