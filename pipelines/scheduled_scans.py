"""Opt-in scheduled quick scans of chosen targets.

Spending quota is the one thing scanwatch does that costs money, so this job is off by default, reads the
account before it starts anything, and derives each `Idempotency-Key` from the target and the schedule
tick: a retried run, or a second run of the same tick, gets the first answer back and spends nothing.
"""

import time
from datetime import UTC, datetime

import dagster as dg

from pipelines.resources import HistoryResource, ScanningServiceResource
from pipelines.settings import Settings
from pipelines.sqlfiles import read_sql
from pipelines.storage import merge_scans
from pipelines.vocabulary import UNFINISHED_SCAN_STATUSES


class ScheduledScansConfig(dg.Config):
    target_ids: list[str] = []
    kind: str = "quick"
    tick: str = ""  # the schedule tick; empty for a manual run, which then keys on the run id
    quota_reserve: int = 5  # quick scans left untouched for people
    poll_seconds: float = 4.0  # the service asks for one poll every 3 to 5 seconds
    timeout_seconds: float = 900.0
    workspace: str = ""  # the followed workspace the targets belong to (default: the first one listed)


@dg.op(pool="duckdb")
def start_and_wait_for_scans(
    context: dg.OpExecutionContext, config: ScheduledScansConfig,
    scanning_service: ScanningServiceResource, history: HistoryResource,
) -> dg.Output:
    tick = config.tick or context.run_id
    with scanning_service.client(config.workspace or Settings.load().workspace_names[0]) as client:
        account = client.get_account()
        quota = (account.get("quotas") or {}).get("quick_scans") or {}
        budget = int(quota.get("remaining") or 0) + int((account.get("pack_credits") or {}).get("scans") or 0)
        budget -= config.quota_reserve
        started, skipped = [], []
        for target_id in config.target_ids:
            if budget <= 0:
                skipped.append(target_id)
                continue
            scan = client.start_scan(target_id, kind=config.kind,
                                     idempotency_key=f"scanwatch-scheduled-{target_id}-{tick}")
            if not scan.get("reused"):
                budget -= 1
            started.append(scan)
        if skipped:
            context.log.warning("quota would run out: %d target(s) not scanned: %s", len(skipped), skipped)
        deadline = time.monotonic() + config.timeout_seconds
        scans = {s["id"]: s for s in started}
        # Only queued and running scans are waited for: a status from a newer service is final here too.
        while (any(s.get("status") in UNFINISHED_SCAN_STATUSES for s in scans.values())
               and time.monotonic() < deadline):
            time.sleep(config.poll_seconds)
            for sid, s in scans.items():
                if s.get("status") in UNFINISHED_SCAN_STATUSES:
                    scans[sid] = client.get_scan(sid)
    with history.get_connection() as conn:
        projects = dict(conn.execute(read_sql("sync/target_projects.sql")).fetchall())
        workspace = (account.get("workspace") or {}).get("id")
        rows = [dict(s, project_id=projects.get(s.get("target_id"))) for s in scans.values()]
        merge_scans(conn, workspace, [r for r in rows if r["project_id"]], now=datetime.now(UTC))
    statuses = [s.get("status") for s in scans.values()]
    return dg.Output(None, metadata={"started": len(started), "skipped_for_quota": len(skipped),
                                     "reused": sum(1 for s in started if s.get("reused")),
                                     "done": statuses.count("done"), "failed": statuses.count("failed")})


@dg.job(description="Start quick scans on chosen targets and wait for them (off by default).")
def scheduled_scans_job():
    start_and_wait_for_scans()


def _targets() -> list[str]:
    return [t for t in Settings.load().scan_targets]


@dg.schedule(job=scheduled_scans_job, cron_schedule=Settings.load().scan_cron,
             default_status=dg.DefaultScheduleStatus.STOPPED)
def scheduled_scans_schedule(context: dg.ScheduleEvaluationContext):
    """Targets from SCANWATCH_SCAN_TARGETS (comma-separated ids); the tick keys each scan's idempotency."""
    targets = _targets()
    if not targets:
        return dg.SkipReason("SCANWATCH_SCAN_TARGETS is empty")
    tick = context.scheduled_execution_time.astimezone(UTC).strftime("%Y%m%dT%H%M")
    return dg.RunRequest(run_key=tick, run_config={"ops": {"start_and_wait_for_scans": {"config": {
        "target_ids": [t.strip() for t in targets], "tick": tick}}}})
