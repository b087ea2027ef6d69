-- The prune's scratch tables, dropped in its transaction.
DROP TABLE prune_counts;
DROP TABLE prune_scores_kept;
