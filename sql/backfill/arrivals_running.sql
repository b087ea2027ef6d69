-- Issues first seen and found fixed so far, per severity, after each change: two ASOF lookups a day apart
-- then give the arrivals of any day, whatever the number of instants.
CREATE OR REPLACE TEMP TABLE _bf_arrivals_running AS
SELECT
    severity,
    ts,
    CAST(sum(count(*) FILTER (WHERE delta = 1)) OVER (PARTITION BY severity ORDER BY ts) AS BIGINT) AS opened,
    CAST(sum(count(*) FILTER (WHERE delta = -1)) OVER (PARTITION BY severity ORDER BY ts) AS BIGINT) AS fixed
FROM _bf_changes
GROUP BY severity, ts;
