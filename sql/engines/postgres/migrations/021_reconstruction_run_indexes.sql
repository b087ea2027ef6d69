-- scanwatch history, schema version 21: the reconstruction's runs (migration 20) found by workspace, as
-- migration 15 found the tables they replace (a reconstruction replaces one workspace's runs; a reader asks
-- for one workspace's past), and read by the roles that read the tables they replace.
-- Migration 20 dropped those tables, and their row-level security policies and grants with them: a
-- workspace's role (`scanwatch roles --workspace`) would have been refused its own past until the roles were
-- applied again. The runs get what `reconstruction_runs` has, the same workspace condition for the same
-- roles, as `scanwatch roles` gives every table holding workspace rows (sql/roles/workspace_table.sql).
-- PostgreSQL's alone (migration 015's reason). Only adds objects and replaces them with themselves: harmless
-- twice.
CREATE INDEX IF NOT EXISTS reconstructed_score_runs_workspace ON reconstructed_score_runs (workspace_id);
CREATE INDEX IF NOT EXISTS reconstructed_open_issue_runs_workspace ON reconstructed_open_issue_runs (workspace_id);

DO $$
DECLARE
    runs text;
    p record;
    g record;
BEGIN
    FOREACH runs IN ARRAY ARRAY['reconstructed_score_runs', 'reconstructed_open_issue_runs'] LOOP
        IF (SELECT relrowsecurity FROM pg_class WHERE oid = to_regclass('reconstruction_runs')) THEN
            EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', runs);
        END IF;
        FOR p IN SELECT policyname, roles, qual FROM pg_policies
                 WHERE schemaname = current_schema() AND tablename = 'reconstruction_runs' AND cmd = 'SELECT' LOOP
            EXECUTE format('DROP POLICY IF EXISTS %I ON %I', p.policyname, runs);
            EXECUTE format('CREATE POLICY %I ON %I FOR SELECT TO %s USING (%s)', p.policyname, runs,
                           (SELECT string_agg(CASE WHEN r = 'public' THEN 'PUBLIC' ELSE quote_ident(r) END, ', ')
                            FROM unnest(p.roles) AS r),
                           p.qual);
        END LOOP;
        FOR g IN SELECT DISTINCT grantee FROM information_schema.role_table_grants
                 WHERE table_schema = current_schema() AND table_name = 'reconstruction_runs'
                   AND privilege_type = 'SELECT' AND grantee <> current_user LOOP
            EXECUTE format('GRANT SELECT ON %I TO %s', runs,
                           CASE WHEN g.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(g.grantee) END);
        END LOOP;
    END LOOP;
END $$;
