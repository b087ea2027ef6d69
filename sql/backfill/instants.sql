-- The moments to reconstruct: from $start (included) to $stop (excluded), every $step_seconds.
CREATE OR REPLACE TEMP TABLE _bf_instants AS
SELECT ts
FROM range($start::TIMESTAMPTZ, $stop::TIMESTAMPTZ, to_seconds($step_seconds::BIGINT)) AS t(ts);
