-- The rows a reconstruction computed, as days (the rows of the views reconstructed_scores and
-- reconstructed_open_issues): its score rows and its open-issue rows.
SELECT (SELECT coalesce(sum(last_day - first_day + 1), 0) FROM _bf_new_scores),
       (SELECT coalesce(sum(last_day - first_day + 1), 0) FROM _bf_new_open);
