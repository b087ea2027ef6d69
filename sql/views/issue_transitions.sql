-- Every status change issue_events holds, with what it means (`status_moves`, the rule's one home): the form
-- every reader of the transitions takes them in. A change is an event the merge names by `status_moves`
-- (`reopened`, `status_changed`); `from_status` and `to_status` are the statuses it left and reached.
--   regression: it left a status whose leaving is one (`fixed`): the issue came back after a fix;
--   fix: it reached `fixed`;  dismissal: it reached a mark;  unmark: it left a mark for an open status.
-- A status this version does not know (a newer service's) is neither.
CREATE VIEW issue_transitions AS
SELECT
    e.workspace_id,
    e.issue_id,
    e.project_id,
    e.target_id,
    e.severity,
    e.observed_at,
    e.event,
    e.from_value AS from_status,
    e.to_value AS to_status,
    coalesce(f.leaving_regresses, false) AS regression,
    coalesce(t.reaching_fixes, false) AS fix,
    coalesce(t.dismissed, false) AS dismissal,
    coalesce(f.dismissed AND t.opens, false) AS unmark,
    coalesce(t.opens, false) AS opening
FROM issue_events AS e
LEFT JOIN status_moves AS f ON f.status = e.from_value
LEFT JOIN status_moves AS t ON t.status = e.to_value
WHERE e.event IN (SELECT left_as FROM status_moves);
