-- PostgreSQL: which of $tables (this writer's, in its schema) the planner's statistics no longer describe, by
-- autovacuum's own rule (rows changed since the last ANALYZE above autovacuum_analyze_threshold plus
-- autovacuum_analyze_scale_factor of the table), or that changed and were never analysed. Autovacuum would
-- analyse them within its next round (autovacuum_naptime); a merge analyses them at once instead, so the reads
-- right after a sync are planned with the rows it wrote, and the small tables (projects, accounts), which a
-- sync changes by fewer rows than the threshold, have statistics from the first sync on.
SELECT s.relname
FROM pg_stat_user_tables AS s
JOIN pg_class AS c ON c.oid = s.relid
WHERE s.schemaname = current_schema()
  AND s.relname = ANY(CAST($tables AS VARCHAR[]))
  AND pg_has_role(c.relowner, 'USAGE')
  AND s.n_mod_since_analyze > 0
  AND (coalesce(s.last_analyze, s.last_autoanalyze) IS NULL
       OR s.n_mod_since_analyze > CAST(current_setting('autovacuum_analyze_threshold') AS BIGINT)
          + CAST(current_setting('autovacuum_analyze_scale_factor') AS DOUBLE PRECISION) * greatest(c.reltuples, 0))
ORDER BY s.relname;
