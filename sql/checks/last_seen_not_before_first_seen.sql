-- Issues last seen before they were first seen.
SELECT count(*) FROM issues WHERE last_seen_at < first_seen_at;
