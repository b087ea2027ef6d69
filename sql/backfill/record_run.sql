-- One reconstruction that changed something, or a workspace's first.
INSERT INTO reconstruction_runs
    (workspace_id, ran_at, first_observed_at, first_day, last_day, score_rows, open_issue_rows, rows_changed)
VALUES
    ($workspace_id, $ran_at, $first_observed_at, $first_day, $last_day, $score_rows, $open_issue_rows,
     $rows_changed)
