-- What a reconstruction staged, gone once it is over (a connection may run another after it).
DROP VIEW IF EXISTS _bf_open_at;
DROP VIEW IF EXISTS _bf_scores_at;
DROP TABLE IF EXISTS _bf_changes;
DROP TABLE IF EXISTS _bf_open_running;
DROP TABLE IF EXISTS _bf_cells;
DROP TABLE IF EXISTS _bf_scans;
DROP TABLE IF EXISTS _bf_instants;
DROP TABLE IF EXISTS _bf_new_scores;
DROP TABLE IF EXISTS _bf_new_open;
