-- One target left unscanned in one tick; a retried tick records it once.
INSERT INTO scan_request_skips (workspace_id, tick, target_id, kind, status, reason, detail, observed_at)
SELECT $workspace_id, $tick, $target_id, $kind, $status, $reason, $detail, $observed_at
WHERE NOT EXISTS (
    SELECT 1 FROM scan_request_skips
    WHERE tick = $tick AND target_id = $target_id AND reason = $reason
)
