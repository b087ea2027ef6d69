-- scanwatch history, schema version 1.
-- API field names are kept as they are. Every row carries workspace_id so that one deployment can
-- follow several workspaces. *_observed_at columns are scanwatch's own view (when a sync saw it);
-- the service's own timestamps (first_seen_at, last_scan_at, ...) are kept untouched beside them.

CREATE TABLE accounts (
    workspace_id          VARCHAR PRIMARY KEY,
    workspace_name        VARCHAR,
    plan                  VARCHAR,
    api_access_allowed    BOOLEAN,
    trial_ends_at         TIMESTAMPTZ,
    period_start          TIMESTAMPTZ,
    period_end            TIMESTAMPTZ,
    free_fixes_left       INTEGER,
    pack_credits_scans    INTEGER,
    pack_credits_fixes    INTEGER,
    projects_limit        INTEGER,
    projects_used         INTEGER,
    projects_paused       INTEGER,
    addresses_per_project INTEGER,
    features              JSON,
    service_version       VARCHAR,
    first_observed_at     TIMESTAMPTZ NOT NULL,
    last_observed_at      TIMESTAMPTZ NOT NULL
);

CREATE TABLE projects (
    workspace_id      VARCHAR NOT NULL,
    id                VARCHAR PRIMARY KEY,
    name              VARCHAR,
    score             INTEGER,
    grade             VARCHAR,
    open_issues       INTEGER,
    paused            BOOLEAN,
    last_scan_at      TIMESTAMPTZ,
    first_observed_at TIMESTAMPTZ NOT NULL,
    last_observed_at  TIMESTAMPTZ NOT NULL,
    removed_at        TIMESTAMPTZ          -- set when the service no longer lists the project
);

CREATE TABLE targets (
    workspace_id      VARCHAR NOT NULL,
    id                VARCHAR PRIMARY KEY,
    project_id        VARCHAR NOT NULL,
    kind              VARCHAR,
    address           VARCHAR,
    verified          BOOLEAN,
    score             INTEGER,
    grade             VARCHAR,
    last_scan_at      TIMESTAMPTZ,
    hidden_issues     INTEGER,
    first_observed_at TIMESTAMPTZ NOT NULL,
    last_observed_at  TIMESTAMPTZ NOT NULL,
    removed_at        TIMESTAMPTZ
);

CREATE TABLE scans (
    workspace_id      VARCHAR NOT NULL,
    id                VARCHAR PRIMARY KEY,
    target_id         VARCHAR NOT NULL,
    project_id        VARCHAR NOT NULL,
    kind              VARCHAR,
    status            VARCHAR,
    score             INTEGER,
    grade             VARCHAR,
    coverage          DOUBLE PRECISION,
    audit_fallback    BOOLEAN,
    reused            BOOLEAN,
    next_real_scan_at TIMESTAMPTZ,
    created_at        TIMESTAMPTZ,
    finished_at       TIMESTAMPTZ,
    first_observed_at TIMESTAMPTZ NOT NULL,
    last_observed_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE issues (
    workspace_id      VARCHAR NOT NULL,
    id                VARCHAR PRIMARY KEY,
    project_id        VARCHAR NOT NULL,
    target_id         VARCHAR NOT NULL,
    address           VARCHAR,
    control_id        VARCHAR,
    family            VARCHAR,
    severity          VARCHAR,
    confidence        VARCHAR,
    status            VARCHAR,
    title             VARCHAR,
    explanation       VARCHAR,
    detail            VARCHAR,
    location          VARCHAR,
    file              VARCHAR,
    line              INTEGER,
    "commit"          VARCHAR,
    evidence          VARCHAR,
    fix_unlocked      BOOLEAN,
    status_reason     VARCHAR,
    marked_by         VARCHAR,
    first_seen_at     TIMESTAMPTZ,
    last_seen_at      TIMESTAMPTZ,
    fixed_at          TIMESTAMPTZ,
    first_observed_at TIMESTAMPTZ NOT NULL,
    last_observed_at  TIMESTAMPTZ NOT NULL
);

-- One row per observed change. event: opened, status_changed, severity_changed, reopened.
-- project_id and severity (at the time of the event) are kept so counters need no join.
CREATE TABLE issue_events (
    workspace_id VARCHAR NOT NULL,
    issue_id     VARCHAR NOT NULL,
    project_id   VARCHAR NOT NULL,
    target_id    VARCHAR,
    severity     VARCHAR,
    observed_at  TIMESTAMPTZ NOT NULL,
    event        VARCHAR NOT NULL,
    from_value   VARCHAR,
    to_value     VARCHAR,
    PRIMARY KEY (issue_id, observed_at, event)
);

-- One row per project (target_id NULL) or target per sync.
CREATE TABLE score_snapshots (
    workspace_id  VARCHAR NOT NULL,
    observed_at   TIMESTAMPTZ NOT NULL,
    project_id    VARCHAR NOT NULL,
    target_id     VARCHAR,
    score         INTEGER,
    grade         VARCHAR,
    open_issues   INTEGER,
    hidden_issues INTEGER
);

-- One row per quota (quick_scans, audits, fixes) per sync.
CREATE TABLE quota_snapshots (
    workspace_id VARCHAR NOT NULL,
    observed_at  TIMESTAMPTZ NOT NULL,
    quota        VARCHAR NOT NULL,
    "limit"      INTEGER,
    used         INTEGER,
    remaining    INTEGER,
    period_start TIMESTAMPTZ,
    period_end   TIMESTAMPTZ,
    PRIMARY KEY (workspace_id, observed_at, quota)
);

-- The pipeline's own health: one row per asset materialization (or failure).
CREATE TABLE sync_runs (
    workspace_id         VARCHAR,
    run_id               VARCHAR NOT NULL,
    asset                VARCHAR NOT NULL,
    started_at           TIMESTAMPTZ NOT NULL,
    finished_at          TIMESTAMPTZ,
    status               VARCHAR NOT NULL,      -- success | failure
    requests             INTEGER,
    retries              INTEGER,
    rate_limited         INTEGER,               -- 429 answers met
    rate_limit_remaining INTEGER,
    rows_written         INTEGER,
    service_version      VARCHAR,
    error                VARCHAR
);

-- Incremental sync bookkeeping: what a project looked like when its lists were last read.
CREATE TABLE project_sync_state (
    workspace_id       VARCHAR NOT NULL,
    project_id         VARCHAR PRIMARY KEY,
    issues_fingerprint VARCHAR,              -- project state when its issue lists were last read
    issues_synced_at   TIMESTAMPTZ,
    full_reconcile_at  TIMESTAMPTZ,          -- last read of every issue list regardless of fingerprint
    scans_fingerprint  VARCHAR,
    scans_synced_at    TIMESTAMPTZ
);

-- Values a newer service version may send that this version does not know: stored, and listed here.
CREATE TABLE ingest_warnings (
    workspace_id VARCHAR,
    observed_at  TIMESTAMPTZ NOT NULL,
    entity       VARCHAR NOT NULL,
    entity_id    VARCHAR,
    field        VARCHAR NOT NULL,
    value        VARCHAR
);

-- The view `project_fingerprints` is the views layer's (sql/views/project_fingerprints.sql).
