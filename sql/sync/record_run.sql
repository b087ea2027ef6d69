-- One asset's run: the pipeline's own health, read by the metrics snapshot.
INSERT INTO sync_runs (workspace_id, workspace_label, run_id, asset, started_at, finished_at, status, requests,
                       retries, rate_limited, rate_limit_remaining, rows_written, service_version, error)
VALUES ($workspace_id, $workspace_label, $run_id, $asset, $started_at, $finished_at, $status, $requests,
        $retries, $rate_limited, $rate_limit_remaining, $rows_written, $service_version, $error);
