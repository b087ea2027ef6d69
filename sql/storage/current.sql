-- What an opener reads to tell an up-to-date history (the usual open, several per step of every sync) in one
-- statement: the schema version and the digest of the views layer the views were created from. It fails on a
-- history without these tables (new, or older than the views layer), which then takes the migration path.
SELECT (SELECT coalesce(max(version), 0) FROM schema_migrations) AS version,
       (SELECT max(digest) FROM view_layer) AS views;
