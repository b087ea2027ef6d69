-- Issue ids that appear on more than one row.
SELECT count(*) - count(DISTINCT id) FROM issues;
