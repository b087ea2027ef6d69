-- The severities every figure by severity lists, per workspace: the vocabulary's (`severities`, written from
-- pipelines/core/vocabulary.py, worst first by `rank`), then any other the workspace's issues carry or carried
-- (a newer service's word still counts, on a row of its own). A grid crosses its projects with these rows, so
-- every cell is present, zeros included: increase() sees a counter's first event, a dashboard a 0, not a gap.
-- `sla_days` is the policy in force (`sla_policy`; none for info, nor for a severity it does not know).
-- The snapshot's grids (issues by status and severity, open and SLA figures, lifecycle counters, time to
-- fix) and the backfill's open-issue cells read it.
CREATE VIEW severity_grid AS
SELECT w.workspace_id, s.severity, s.rank, CAST(p.days AS DOUBLE PRECISION) AS sla_days
-- every workspace the history holds anything of (an account, or issues)
FROM (SELECT workspace_id FROM accounts UNION SELECT workspace_id FROM issues) AS w
CROSS JOIN severities AS s
LEFT JOIN sla_policy AS p ON p.severity = s.severity
UNION ALL
SELECT o.workspace_id, o.severity, CAST(NULL AS INTEGER), CAST(NULL AS DOUBLE PRECISION)
FROM (SELECT workspace_id, severity FROM issues WHERE severity IS NOT NULL
      UNION
      SELECT workspace_id, severity FROM issue_events WHERE severity IS NOT NULL
      UNION
      -- the severity an issue had before a change, when no earlier event of it carries it
      SELECT workspace_id, from_value FROM issue_events WHERE event = 'severity_changed' AND from_value IS NOT NULL
     ) AS o
WHERE o.severity NOT IN (SELECT severity FROM severities);
