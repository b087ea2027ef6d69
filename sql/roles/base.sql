-- The roles of a PostgreSQL history (docs/postgres.md, "Roles: who gets what"), printed or applied by
-- `scanwatch roles`, as an administrator, in the history's database. Every statement may run again.
-- Roles are created without a password: give each one its own (\password scanwatch_reader in psql).
DO $$ BEGIN CREATE ROLE {writer} LOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE {reader} LOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE {views} NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE {grafana} LOGIN IN ROLE {views}; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;

-- The writer (the syncs: CLI, Dagster runs, the sensor) owns the schema and stages into temporary tables.
DO $$ BEGIN EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO {writer}', current_database()); END $$;
GRANT USAGE, CREATE ON SCHEMA {schema} TO {writer};
-- No one else creates objects beside the history's (PostgreSQL 15 no longer lets PUBLIC; older servers did):
-- a function a reader placed there could be called by the writer, with the writer's rights.
REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC;

-- The reader (scanwatch sql, notebooks, the exporter) reads every table and view, and nothing else.
DO $$ BEGIN EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO {reader}', current_database()); END $$;
GRANT USAGE ON SCHEMA {schema} TO {reader};
GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {reader};
ALTER DEFAULT PRIVILEGES FOR ROLE {writer} IN SCHEMA {schema} GRANT SELECT ON TABLES TO {reader};
{reader_limits}

-- Grafana's data source reads the views layer (the writer grants it each view) and no table.
DO $$ BEGIN EXECUTE format('GRANT CONNECT ON DATABASE %I TO {grafana}', current_database()); END $$;
GRANT USAGE ON SCHEMA {schema} TO {views};
{grafana_limits}

-- What no client of this database may execute, whatever its role: signals to other sessions (a reader
-- could end another reader's session, or the writer's), advisory locks (held, they would stop the openers
-- that migrate and bind names; the writer alone keeps them) and the functions that create or write large
-- objects, or the write-ahead log (pg_logical_emit_message: writes no table privilege covers, even in a
-- READ ONLY transaction), and set_config (a statement raising its own work_mem or timeouts for the queries
-- it then runs; the writer keeps it, pg_dump calls it). Function privileges belong to this database alone.
-- What a role's settings below cannot stop: a client's connection options (`options=-c work_mem=...` in its
-- URL) set any user-settable parameter at login; the server's own limits bound those.
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint),
    pg_catalog.pg_cancel_backend(integer) FROM PUBLIC;
DO $$
DECLARE f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = 'pg_catalog'::regnamespace
               AND (p.proname LIKE 'pg\_%advisory\_%' ESCAPE '\'
                    OR p.proname IN ('set_config', 'pg_logical_emit_message', 'lo_creat', 'lo_create', 'lo_from_bytea', 'lo_import', 'lo_put',
                                     'lowrite', 'lo_truncate', 'lo_truncate64', 'lo_unlink'))
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
        IF f::text LIKE 'pg\_%advisory%' ESCAPE '\' OR f::text LIKE 'set\_config(%' ESCAPE '\' THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO {writer}', f);
        END IF;
    END LOOP;
END $$;
