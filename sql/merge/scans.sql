-- stg_scans: scans read this run (newest pages down to the first already-known finished scan, plus
-- re-reads of scans the history still holds as queued).
INSERT INTO scans (workspace_id, id, target_id, project_id, kind, status, score, grade, coverage, audit_fallback,
                   reused, next_real_scan_at, created_at, finished_at, first_observed_at, last_observed_at)
SELECT getvariable('workspace_id'), id, target_id, project_id, kind, status, score, grade, coverage, audit_fallback,
       reused, next_real_scan_at, created_at, finished_at, getvariable('now'), getvariable('now')
FROM stg_scans
ON CONFLICT (id) DO UPDATE SET
    status = excluded.status, score = excluded.score, grade = excluded.grade, coverage = excluded.coverage,
    audit_fallback = excluded.audit_fallback, next_real_scan_at = excluded.next_real_scan_at,
    -- reused: a scan request was answered with this existing scan at least once (the scheduled-scans job sees
    -- it in the POST answer; a list or GET shows false). Once true it stays true.
    reused = scans.reused OR coalesce(excluded.reused, false),
    finished_at = excluded.finished_at, last_observed_at = excluded.last_observed_at;
