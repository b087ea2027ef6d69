-- Issues fixed without fixed_at, or with fixed_at and another status.
SELECT count(*) FROM issues WHERE (status = 'fixed') <> (fixed_at IS NOT NULL);
