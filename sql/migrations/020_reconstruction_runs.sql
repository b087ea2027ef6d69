-- scanwatch history, schema version 20: the reconstruction kept as runs of days. The past before a
-- workspace's first sync changes only when a scan finishes or an issue is found or fixed, yet it was kept as
-- one row per target, project and severity cell per day: about 9,100 rows for a small workspace's year, the
-- history's largest tables, which DuckDB rewrote at every checkpoint of a first sync of many workspaces
-- (docs/benchmarks.md, "Where a first sync's peak goes"). A run is a stretch of consecutive days holding the
-- same values: about 660 rows for that year. The views `reconstructed_scores` and `reconstructed_open_issues`
-- (sql/views/) give the same rows per day as before, under the same names and columns.
--
-- The former tables' rows are moved into runs and the tables dropped. Applied again, the former tables are
-- made empty first, nothing moves, and they are dropped again: harmless twice. (Migrations run with the
-- views layer dropped, so the names are free.)
CREATE TABLE IF NOT EXISTS reconstructed_score_runs (
    workspace_id VARCHAR NOT NULL,
    first_day    DATE NOT NULL,   -- the run's first and last UTC day; a day's values are the state at its end
    last_day     DATE NOT NULL,
    project_id   VARCHAR NOT NULL,
    target_id    VARCHAR,         -- NULL on a project's run
    score        INTEGER,
    grade        VARCHAR,
    scan_id      VARCHAR          -- the scan the target's score comes from (NULL on a project's run)
);

CREATE TABLE IF NOT EXISTS reconstructed_open_issue_runs (
    workspace_id VARCHAR NOT NULL,
    first_day    DATE NOT NULL,
    last_day     DATE NOT NULL,
    project_id   VARCHAR NOT NULL,
    severity     VARCHAR NOT NULL,
    open_issues  INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS reconstructed_scores (
    workspace_id VARCHAR NOT NULL,
    day          DATE NOT NULL,
    project_id   VARCHAR NOT NULL,
    target_id    VARCHAR,
    score        INTEGER,
    grade        VARCHAR,
    scan_id      VARCHAR
);

CREATE TABLE IF NOT EXISTS reconstructed_open_issues (
    workspace_id VARCHAR NOT NULL,
    day          DATE NOT NULL,
    project_id   VARCHAR NOT NULL,
    severity     VARCHAR NOT NULL,
    open_issues  INTEGER NOT NULL
);

-- Days of equal values, each day minus its number among them: consecutive days share the result (an island).
-- A row held twice (the tables had no key) is one day: counted twice, it would stretch its run over the next
-- day, whatever that day held.
INSERT INTO reconstructed_score_runs
SELECT workspace_id, min(day), max(day), project_id, target_id, score, grade, scan_id
FROM (
    SELECT *, day - CAST(row_number() OVER (PARTITION BY workspace_id, project_id, target_id, score, grade, scan_id
                                            ORDER BY day) AS INTEGER) AS island
    FROM (SELECT DISTINCT * FROM reconstructed_scores) AS kept
) AS days
GROUP BY workspace_id, project_id, target_id, score, grade, scan_id, island;

INSERT INTO reconstructed_open_issue_runs
SELECT workspace_id, min(day), max(day), project_id, severity, open_issues
FROM (
    SELECT *, day - CAST(row_number() OVER (PARTITION BY workspace_id, project_id, severity, open_issues
                                            ORDER BY day) AS INTEGER) AS island
    FROM (SELECT DISTINCT * FROM reconstructed_open_issues) AS kept
) AS days
GROUP BY workspace_id, project_id, severity, open_issues, island;

DROP TABLE reconstructed_scores;
DROP TABLE reconstructed_open_issues;
