-- What every merge statement of one transaction reads: whose rows, the sync's instant, and the contract
-- version the service answered with. One row of a temp table, which the statements join or read as a scalar
-- subquery: a table both engines know (DuckDB's session variables have no PostgreSQL twin), private to the
-- connection, and rolled back with the merge.
CREATE TEMP TABLE IF NOT EXISTS merge_context (workspace_id VARCHAR, observed_at TIMESTAMPTZ, service_version VARCHAR);
DELETE FROM merge_context;
INSERT INTO merge_context (workspace_id, observed_at, service_version)
VALUES ($workspace_id, CAST($now AS TIMESTAMPTZ), $service_version);
