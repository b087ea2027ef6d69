-- scanwatch history, schema version 6: the vocabulary as reference tables, so SQL (the cookbook, the
-- snapshot, your own queries) reads the same severities, statuses and SLA policy as the Python code.
-- Their rows come from pipelines/core/vocabulary.py: rewritten whenever the history is opened for writing, and
-- `sla_policy` at every metrics snapshot, with the policy that snapshot used (SCANWATCH_SLA_DAYS).
-- Only adds objects, so it is safe on any existing history.
CREATE TABLE IF NOT EXISTS severities (
    severity VARCHAR PRIMARY KEY,
    rank INTEGER NOT NULL  -- 1 is the worst
);
CREATE TABLE IF NOT EXISTS issue_statuses (
    status VARCHAR PRIMARY KEY,
    rank INTEGER NOT NULL,
    dismissed BOOLEAN NOT NULL  -- marked by a person: false positive or accepted risk
);
CREATE TABLE IF NOT EXISTS scan_statuses (
    status VARCHAR PRIMARY KEY,
    rank INTEGER NOT NULL,
    finished BOOLEAN NOT NULL  -- the scan will not change any more
);
CREATE TABLE IF NOT EXISTS sla_policy (
    severity VARCHAR PRIMARY KEY,
    days INTEGER NOT NULL  -- an open issue older than this, from first_seen_at, breaches its SLA
);
