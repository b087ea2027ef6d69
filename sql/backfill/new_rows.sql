-- The rows a reconstruction computed: its score rows and its open-issue rows.
SELECT (SELECT count(*) FROM _bf_new_scores), (SELECT count(*) FROM _bf_new_open);
