-- Every target with the two rules about it every reader shares (the sync, the merge, the snapshot, the checks,
-- the cookbook):
--   listed: GET /projects still lists it (the merge marks `removed_at` when it stops; a target listed again
--     is revived). A target no longer listed leaves every count of the present, never its past.
--   site_unproved: a site whose ownership is not proved: the service says so (a domain target, `verified`
--     false) or counts the issues it hides there (`hidden_issues`, given only for a site not yet proved). The
--     service hides such a site's issues (the contract's "Unverified site"); a repository's are never hidden.
CREATE VIEW target_states AS
SELECT
    t.*,
    t.removed_at IS NULL AS listed,
    coalesce(t.kind = 'domain' AND NOT t.verified, false) OR t.hidden_issues IS NOT NULL AS site_unproved
FROM targets AS t;
