-- scanwatch history, schema version 8: targets a scheduled scan run did not scan, and why.
-- One row per target and tick: `reason` is the service's error code when it refused the scan request
-- (402 project_paused, 409 proof_required, 429 repository_analyses_limit_reached, 503 platform_busy, ...)
-- or scanwatch's own reason for not asking (`project_paused`, `quota_reserve`, `target_not_listed`,
-- `kind_not_allowed`). Only adds a table, so it is safe on any existing history.
CREATE TABLE IF NOT EXISTS scan_request_skips (
    workspace_id VARCHAR,
    tick         VARCHAR NOT NULL,
    target_id    VARCHAR NOT NULL,
    kind         VARCHAR,          -- the kind that was (or would have been) asked for
    status       INTEGER,          -- the HTTP status of a refusal; NULL when scanwatch did not ask
    reason       VARCHAR NOT NULL,
    detail       VARCHAR,
    observed_at  TIMESTAMPTZ NOT NULL
);
