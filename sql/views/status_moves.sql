-- What it means for an issue to leave or reach each status: the one home of the issue transitions. Every
-- reader of a status change asks this view, through `issue_transitions`, and the merge names each change it
-- records by it (sql/merge/issues.sql), so the `reopened` event, the regressions (`reopenings`: the cookbook's
-- `regressions`, the history dashboard), the lifecycle counters (`secscan_issue_reopened_total`, `_fixed_`,
-- `_dismissed_`), the new-critical pages (`critical_arrivals`) and the open counts by day agree.
--
-- Leaving `fixed` is a regression, every time and everywhere, whatever the issue reaches (`open`, or a mark
-- set between two syncs) and whichever event recorded it: a `reopened` event, or a `status_changed` from
-- `fixed` (a `fixed -> open` status change IS a regression). Why: in the contract's issue states only a
-- person moves `open` to a mark and a mark back to `open` (PATCH), and a PATCH of a fixed issue is refused
-- (409 issue_already_fixed); `fixed` is reached and left by the service's own scans alone. An issue that
-- leaves it was found again after a fix: it came back. The merge records such a change as `reopened`
-- (`left_as`), every other status change as `status_changed`.
--
-- reaching_fixes: reaching it is a fix (the service found the issue fixed); dismissed: a mark set by a person
-- (`issue_statuses`, from pipelines/core/vocabulary.py); opens: reaching it puts the issue in the open counts.
CREATE VIEW status_moves AS
SELECT
    s.status,
    s.dismissed,
    s.status = 'fixed' AS leaving_regresses,
    CASE WHEN s.status = 'fixed' THEN 'reopened' ELSE 'status_changed' END AS left_as,
    s.status = 'fixed' AS reaching_fixes,
    s.status = 'open' AS opens
FROM issue_statuses AS s;
