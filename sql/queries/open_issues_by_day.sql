-- name: open_issues_by_day
-- description: Open issues at the end of each UTC day per workspace and severity, from first_seen_at, fixed_at and
--   issue_events; days before the workspace's first sync from the reconstruction (column source).
--
-- An issue counts on a day when it was first seen before the day ended and its status at the end of the day
-- was `open`. The status at a moment is the latest status event before it; before an issue's first status
-- event, the event's from_value; for an issue with no status event, its current status, with `fixed`
-- starting at fixed_at. An issue marked false positive or accepted risk before scanwatch first saw it
-- never counts. The service's fixed_at is more exact than the sync that observed the fix, so it is used
-- as the time of the fix event it belongs to. Severity follows severity_changed events the same way.
-- An issue the service stopped showing (hidden: site unproved, target or project removed) leaves the count at
-- its `hidden` event and comes back at its `visible_again` event.
-- Each workspace's series runs from its first first_seen_at to today (or to the latest change, if the service's
-- clock is ahead of ours), so its last row agrees with the issues whose status is `open` now. The work grows
-- with issues and changes, not with issues times days. The state at a moment is the latest change before it,
-- carried forward over each issue's moments (a running count of changes numbers the stretch each one holds).
WITH status_changes AS (
    -- Each status change as `issue_transitions` reads it; a regression first when one sync recorded two.
    SELECT issue_id, observed_at, CASE WHEN regression THEN 1 ELSE 2 END AS step,
           from_status AS from_value, to_status AS to_value
    FROM issue_transitions
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
        END AS changed_at,
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
        timezone('UTC', observed_at) AS changed_at,
        row_number() OVER (PARTITION BY issue_id ORDER BY observed_at) AS n
    FROM issue_events
    WHERE event = 'severity_changed'
),
visibility_events AS (
    SELECT issue_id, timezone('UTC', observed_at) AS changed_at, event = 'visible_again' AS visible,
           row_number() OVER (PARTITION BY issue_id ORDER BY observed_at) AS n
    FROM issue_events
    WHERE event IN ('hidden', 'visible_again')
),
issue_base AS (
    SELECT
        workspace_id,
        id,
        status,
        severity,
        timezone('UTC', first_seen_at) AS first_seen,
        timezone('UTC', coalesce(fixed_at, last_seen_at)) AS fixed_at
    FROM issues
    WHERE first_seen_at IS NOT NULL
),
-- Moments an issue's state may change; its state holds from one to the next.
points AS (
    SELECT id, first_seen AS p FROM issue_base
    UNION SELECT id, fixed_at FROM issue_base WHERE status = 'fixed' AND fixed_at > first_seen
    UNION SELECT issue_id, changed_at FROM status_events
    UNION SELECT issue_id, changed_at FROM severity_events
    UNION SELECT issue_id, changed_at FROM visibility_events
),
-- What changed at each moment (the latest change of a kind when a moment holds several) ...
marks AS (
    SELECT
        pt.id,
        pt.p,
        s.to_value AS status_to,
        v.to_value AS severity_to,
        h.visible AS visible_to,
        count(s.to_value) OVER w AS status_stretch,
        count(v.to_value) OVER w AS severity_stretch,
        count(h.visible) OVER w AS visible_stretch
    FROM points AS pt
    LEFT JOIN (SELECT issue_id, changed_at, arg_max(to_value, n) AS to_value FROM status_events
               GROUP BY issue_id, changed_at) AS s ON s.issue_id = pt.id AND s.changed_at = pt.p
    LEFT JOIN (SELECT issue_id, changed_at, arg_max(to_value, n) AS to_value FROM severity_events
               GROUP BY issue_id, changed_at) AS v ON v.issue_id = pt.id AND v.changed_at = pt.p
    LEFT JOIN (SELECT issue_id, changed_at, arg_max(visible, n) AS visible FROM visibility_events
               GROUP BY issue_id, changed_at) AS h ON h.issue_id = pt.id AND h.changed_at = pt.p
    WINDOW w AS (PARTITION BY pt.id ORDER BY pt.p ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
-- ... carried forward to the moments after it, up to the next change of that kind.
carried AS (
    SELECT
        id,
        p,
        max(status_to) OVER (PARTITION BY id, status_stretch) AS status_now,
        max(severity_to) OVER (PARTITION BY id, severity_stretch) AS severity_now,
        bool_or(visible_to) OVER (PARTITION BY id, visible_stretch) AS visible_now
    FROM marks
),
states AS (
    SELECT
        b.workspace_id,
        c.p,
        lead(c.p) OVER (PARTITION BY c.id ORDER BY c.p) AS next_p,
        coalesce(
            c.status_now,
            first_status.from_value,
            CASE WHEN b.status = 'fixed' AND b.fixed_at > c.p THEN 'open' ELSE b.status END
        ) AS status_then,
        coalesce(c.severity_now, first_severity.from_value, b.severity) AS severity_then,
        coalesce(c.visible_now, TRUE) AS visible_then
    FROM carried AS c
    JOIN issue_base AS b ON b.id = c.id AND c.p >= b.first_seen
    LEFT JOIN status_events AS first_status ON first_status.issue_id = c.id AND first_status.n = 1
    LEFT JOIN severity_events AS first_severity ON first_severity.issue_id = c.id AND first_severity.n = 1
),
-- A state held over (p, next_p] is the state at the end of days date(p) up to the day before date(next_p):
-- count it in with +1 on the first and out with -1 on the day after the last, then add up day by day.
deltas AS (
    SELECT workspace_id, CAST(p AS DATE) AS day, severity_then AS severity, 1 AS delta FROM states
    WHERE status_then = 'open' AND visible_then
    UNION ALL
    SELECT workspace_id, CAST(next_p AS DATE), severity_then, -1 FROM states
    WHERE status_then = 'open' AND visible_then AND next_p IS NOT NULL
),
daily AS (
    SELECT workspace_id, day, severity, sum(delta) AS delta FROM deltas GROUP BY workspace_id, day, severity
),
spans AS (
    SELECT b.workspace_id, CAST(min(pt.p) AS DATE) AS first_day,
           -- Today, or later if the service's clock runs ahead of ours: the last row is always the state now.
           CAST(greatest(timezone('UTC', now()), max(pt.p)) AS DATE) AS last_day
    FROM points AS pt
    JOIN issue_base AS b ON b.id = pt.id
    GROUP BY b.workspace_id
),
days AS (
    SELECT s.workspace_id, CAST(d.d AS DATE) AS day
    FROM generate_series(
        CAST((SELECT min(first_day) FROM spans) AS TIMESTAMP),
        CAST((SELECT max(last_day) FROM spans) AS TIMESTAMP),
        INTERVAL '1 day'
    ) AS d(d)
    JOIN spans AS s ON CAST(d.d AS DATE) BETWEEN s.first_day AND s.last_day
),
observed AS (
    SELECT d.workspace_id, d.day, s.severity,
           sum(coalesce(x.delta, 0)) OVER (PARTITION BY d.workspace_id, s.severity ORDER BY d.day) AS issues
    FROM days AS d
    -- Every severity of the vocabulary, and any other the workspace's issues carried (`severity_grid`).
    JOIN severity_grid AS s ON s.workspace_id = d.workspace_id
    LEFT JOIN daily AS x ON x.workspace_id = d.workspace_id AND x.day = d.day AND x.severity = s.severity
),
-- Before the workspace's first sync: the reconstruction (`scanwatch backfill`), never an observation.
reconstructed AS (
    SELECT r.workspace_id, r.day, r.severity, sum(r.open_issues) AS issues
    FROM reconstructed_open_issues AS r
    JOIN first_observations AS f ON f.workspace_id = r.workspace_id AND r.day < f.first_observed_day
    GROUP BY r.workspace_id, r.day, r.severity
),
by_source AS (
    SELECT workspace_id, day, 'reconstructed' AS source, severity, issues FROM reconstructed
    UNION ALL
    SELECT
        o.workspace_id,
        o.day,
        -- a history never backfilled: the days before the first sync are rebuilt here alike
        CASE WHEN o.day < f.first_observed_day THEN 'reconstructed' ELSE 'observed' END,
        o.severity,
        o.issues
    FROM observed AS o
    LEFT JOIN first_observations AS f ON f.workspace_id = o.workspace_id
    WHERE f.first_observed_day IS NULL OR o.day >= f.first_observed_day
       OR NOT EXISTS (SELECT 1 FROM reconstructed AS r WHERE r.workspace_id = o.workspace_id)
),
labelled AS (
    SELECT b.day, w.workspace, b.workspace_id, b.source, b.severity, b.issues,
           CAST(sum(b.issues) OVER (PARTITION BY b.workspace_id, b.day, b.source) AS BIGINT) AS total
    FROM by_source AS b
    LEFT JOIN workspace_labels AS w ON w.workspace_id = b.workspace_id
)
-- One column per severity, worst first, as pipelines/core/vocabulary.py lists them (`scanwatch sql` writes the comment
-- out once per severity); a severity the vocabulary does not know still counts in the total.
SELECT
    day,
    workspace,
    source,
    /* each severity: CAST(coalesce(sum(issues) FILTER (WHERE severity = '{severity}'), 0) AS BIGINT) AS "{severity}", */
    total
FROM labelled
GROUP BY day, workspace, workspace_id, source, total
ORDER BY workspace, workspace_id, day;
