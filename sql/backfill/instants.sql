-- The moments to reconstruct: from $start (included) to $stop (excluded), every $step_seconds. The table stays
-- (the `_bf_open_at` and `_bf_scores_at` views read it); each call replaces its rows.
CREATE TEMP TABLE IF NOT EXISTS _bf_instants (ts TIMESTAMPTZ);
DELETE FROM _bf_instants;
INSERT INTO _bf_instants
SELECT t.ts
FROM generate_series(CAST($start AS TIMESTAMPTZ), CAST($stop AS TIMESTAMPTZ),
                     CAST($step_seconds AS BIGINT) * INTERVAL '1 second') AS t(ts)
WHERE t.ts < CAST($stop AS TIMESTAMPTZ);
