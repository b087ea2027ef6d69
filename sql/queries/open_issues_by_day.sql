-- name: open_issues_by_day
-- description: Open issues at the end of each UTC day by severity, rebuilt from first_seen_at, fixed_at and
--   the status and severity changes (marks, fixes, reopenings) observed in issue_events.
--
-- An issue counts on a day when it was first seen before the day ended and its status at the end of the day
-- was `open`. The status at a moment is the latest status event before it; before an issue's first status
-- event, the event's from_value; for an issue with no status event, its current status, with `fixed`
-- starting at fixed_at. An issue marked false positive or accepted risk before scanwatch first saw it
-- never counts. The service's fixed_at is more exact than the sync that observed the fix, so it is used
-- as the time of the fix event it belongs to. Severity follows severity_changed events the same way.
-- The last row (today) agrees with the issues whose status is `open` now.
WITH status_changes AS (
    SELECT
        issue_id,
        observed_at,
        CASE event WHEN 'reopened' THEN 1 WHEN 'status_changed' THEN 2 ELSE 3 END AS step,
        CASE event
            WHEN 'fixed' THEN coalesce(from_value, 'open')
            WHEN 'reopened' THEN coalesce(from_value, 'fixed')
            ELSE from_value
        END AS from_value,
        CASE event
            WHEN 'fixed' THEN 'fixed'
            WHEN 'reopened' THEN coalesce(to_value, 'open')
            ELSE to_value
        END AS to_value
    FROM issue_events
    WHERE event IN ('status_changed', 'reopened', 'fixed')
),
-- A sync can record two changes at once (reopened, then fixed again): keep where it started and ended.
status_steps AS (
    SELECT issue_id, observed_at, arg_min(from_value, step) AS from_value, arg_max(to_value, step) AS to_value
    FROM status_changes
    GROUP BY issue_id, observed_at
),
status_events AS (
    SELECT
        e.issue_id,
        e.from_value,
        e.to_value,
        CASE
            WHEN e.to_value = 'fixed'
                AND i.fixed_at IS NOT NULL
                AND i.fixed_at <= e.observed_at
                AND i.fixed_at > coalesce(lag(e.observed_at) OVER w, i.first_seen_at)
                THEN timezone('UTC', i.fixed_at)
            ELSE timezone('UTC', e.observed_at)
        END AS at,
        row_number() OVER w AS n
    FROM status_steps AS e
    JOIN issues AS i ON i.id = e.issue_id
    WINDOW w AS (PARTITION BY e.issue_id ORDER BY e.observed_at)
),
severity_events AS (
    SELECT
        issue_id,
        from_value,
        to_value,
        timezone('UTC', observed_at) AS at,
        row_number() OVER (PARTITION BY issue_id ORDER BY observed_at) AS n
    FROM issue_events
    WHERE event = 'severity_changed'
),
days AS (
    SELECT CAST(d AS DATE) AS day, d + INTERVAL 1 DAY AS day_end
    FROM generate_series(
        (SELECT CAST(timezone('UTC', min(first_seen_at)) AS DATE) FROM issues),
        CAST(timezone('UTC', now()) AS DATE),
        INTERVAL 1 DAY
    ) AS t(d)
),
issue_days AS (
    SELECT
        d.day,
        d.day_end,
        i.id,
        i.status,
        i.severity,
        timezone('UTC', coalesce(i.fixed_at, i.last_seen_at)) AS fixed_at
    FROM days AS d
    JOIN issues AS i ON timezone('UTC', i.first_seen_at) < d.day_end
),
with_status AS (
    SELECT
        x.day,
        coalesce(
            s.to_value,
            first_status.from_value,
            CASE WHEN x.status = 'fixed' AND x.fixed_at >= x.day_end THEN 'open' ELSE x.status END
        ) AS status_then,
        coalesce(v.to_value, first_severity.from_value, x.severity) AS severity_then
    FROM issue_days AS x
    ASOF LEFT JOIN status_events AS s ON s.issue_id = x.id AND x.day_end > s.at
    ASOF LEFT JOIN severity_events AS v ON v.issue_id = x.id AND x.day_end > v.at
    LEFT JOIN status_events AS first_status ON first_status.issue_id = x.id AND first_status.n = 1
    LEFT JOIN severity_events AS first_severity ON first_severity.issue_id = x.id AND first_severity.n = 1
)
SELECT
    d.day,
    count(*) FILTER (WHERE w.severity_then = 'critical') AS critical,
    count(*) FILTER (WHERE w.severity_then = 'high') AS high,
    count(*) FILTER (WHERE w.severity_then = 'medium') AS medium,
    count(*) FILTER (WHERE w.severity_then = 'low') AS low,
    count(*) FILTER (WHERE w.severity_then = 'info') AS info,
    count(w.day) AS total
FROM days AS d
LEFT JOIN with_status AS w ON w.day = d.day AND w.status_then = 'open'
GROUP BY d.day
ORDER BY d.day;
