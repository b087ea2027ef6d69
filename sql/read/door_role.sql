-- What the role of the read door's connection could do beyond reading the history: be a superuser, a member
-- of the roles that reach the server's files and programs, the owner of a history table, or allowed to write
-- one. Every role it may become counts (its own, those it inherits, and those it may SET ROLE to: a
-- function can change the role mid-statement). The door opens only for a role with none of them
-- (docs/postgres.md, "Roles: who gets what").
WITH reachable AS (
    SELECT oid, rolname, rolsuper FROM pg_roles WHERE pg_has_role(current_user, oid, 'MEMBER')
),
history AS (
    SELECT c.oid, c.relname::text AS name, c.relowner
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
)
SELECT current_user,
       EXISTS (SELECT 1 FROM reachable WHERE rolsuper) AS superuser,
       ARRAY(SELECT rolname::text FROM reachable
             WHERE rolname IN ('pg_read_server_files', 'pg_write_server_files', 'pg_execute_server_program')
             ORDER BY 1) AS server_roles,
       ARRAY(SELECT h.name FROM history h WHERE h.relowner IN (SELECT oid FROM reachable) ORDER BY 1) AS owned,
       ARRAY(SELECT h.name FROM history h
             WHERE EXISTS (SELECT 1 FROM reachable r
                           WHERE has_table_privilege(r.oid, h.oid, 'INSERT, UPDATE, DELETE, TRUNCATE'))
             ORDER BY 1) AS writable;
