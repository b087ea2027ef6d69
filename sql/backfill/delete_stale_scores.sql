-- Reconstructed score runs of the workspace that the new reconstruction no longer has.
DELETE FROM reconstructed_score_runs AS r
WHERE r.workspace_id = $workspace_id
  AND NOT EXISTS (
    SELECT 1 FROM _bf_new_scores AS n
    WHERE n.first_day = r.first_day AND n.last_day = r.last_day AND n.project_id = r.project_id
      AND n.target_id IS NOT DISTINCT FROM r.target_id AND n.score IS NOT DISTINCT FROM r.score
      AND n.grade IS NOT DISTINCT FROM r.grade AND n.scan_id IS NOT DISTINCT FROM r.scan_id
  )
