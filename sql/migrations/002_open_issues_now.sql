-- scanwatch history, schema version 2: `open_issues_now`, the question asked most often ("what is open right
-- now, where?") as one view: every issue open now, on a project and target the service still lists, with
-- the project's name and the target's kind beside the issue's own fields.
--
-- A view, not indexes: DuckDB answers the range and group-by lookups of the dashboards and the cookbook
-- from its zone maps, while every ART index on issues, scans or issue_events made the per-sync upserts
-- 2 to 7 times slower in a measurement on 50k rows, for no faster read. Only adds an object, so it is safe on
-- any existing history, and CREATE OR REPLACE makes applying it twice harmless.
CREATE OR REPLACE VIEW open_issues_now AS
SELECT i.*, p.name AS project_name, t.kind AS target_kind
FROM issues i
JOIN projects p ON p.id = i.project_id
LEFT JOIN targets t ON t.id = i.target_id
WHERE i.status = 'open'
  AND p.removed_at IS NULL
  AND (t.id IS NULL OR t.removed_at IS NULL);
