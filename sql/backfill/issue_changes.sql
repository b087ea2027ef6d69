-- Every issue of one workspace as a +1 when first seen and a -1 when fixed, under the severity it was first
-- seen with (`first_severities`, which `secscan_issues_detected_total` counts by too). The issues are those
-- `visible_issues` counts, the one rule /metrics and the cookbook follow (an issue set aside, an unproved
-- site's, is in no reconstructed count either), and those of a project or target removed since: removal
-- takes a project off /metrics from then on, and its past stays (docs/backfill.md).
-- Marks carry no timestamp, so an issue marked (false positive, accepted risk) before scanwatch saw it
-- never counts; one marked later was open before (its first status event says what it was). A fixed
-- issue found open again has no earlier fixed_at: it counts as open from its first sighting.
DROP TABLE IF EXISTS _bf_changes;
CREATE TEMP TABLE _bf_changes AS
WITH first_status AS (
    SELECT issue_id, arg_min(from_status, observed_at) AS from_value
    FROM issue_transitions
    WHERE workspace_id = $workspace_id AND from_status IS NOT NULL
    GROUP BY issue_id
),
spans AS (
    SELECT
        i.workspace_id,
        i.project_id,
        fv.severity,
        i.first_seen_at AS opened_at,
        CASE WHEN i.status = 'fixed'
            THEN greatest(coalesce(i.fixed_at, i.last_seen_at, i.first_seen_at), i.first_seen_at)
        END AS fixed_at,
        coalesce(fs.from_value, i.status) AS status_before
    FROM issues AS i
    LEFT JOIN first_status AS fs ON fs.issue_id = i.id
    -- Joined on the workspace too: the view then ranks this workspace's events only, not every workspace's.
    JOIN first_severities AS fv ON fv.workspace_id = i.workspace_id AND fv.issue_id = i.id
    WHERE i.workspace_id = $workspace_id AND i.first_seen_at IS NOT NULL AND i.severity IS NOT NULL
      AND (i.id IN (SELECT v.id FROM visible_issues AS v WHERE v.workspace_id = $workspace_id)
           OR i.hidden_reason = ANY(CAST($removal_reasons AS VARCHAR[]))
           OR i.project_id IN (SELECT p.project_id FROM project_labels AS p WHERE p.workspace_id = $workspace_id
                                                                         AND NOT p.listed)
           OR i.target_id IN (SELECT t.id FROM target_states AS t WHERE t.workspace_id = $workspace_id
                                                                  AND NOT t.listed))
)
SELECT workspace_id, project_id, severity, opened_at AS ts, 1 AS delta
FROM spans WHERE status_before IN ('open', 'fixed')
UNION ALL
SELECT workspace_id, project_id, severity, fixed_at, -1
FROM spans WHERE status_before IN ('open', 'fixed') AND fixed_at IS NOT NULL;
