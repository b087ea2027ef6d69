"""Opt-in scheduled scans of chosen targets.

Spending quota is the one thing scanwatch does that costs money, so this job is off by default, reads the
account before it starts anything, and derives each `Idempotency-Key` from the target and the schedule
tick: a retried run, or a second run of the same tick, gets the first answer back and spends nothing.
"""

import time
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from pipelines.api.errors import ApiError
from pipelines.core.scan_budget import Budget, fitting_kind
from pipelines.core.sqlfiles import read_sql
from pipelines.core.vocabulary import UNFINISHED_SCAN_STATUSES
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.storage import merge_scans


class ScheduledScansConfig(dg.Config):
    target_ids: list[str] = []
    kind: str = "quick"  # "audit" asks for audits where the plan and a proved site allow; repositories get theirs
    tick: str = ""  # the schedule tick; empty for a manual run, which then keys on the run id
    quota_reserve: int = 5  # scans of each quota kind left untouched for people
    poll_seconds: float = 4.0  # the service asks for one poll every 3 to 5 seconds
    timeout_seconds: float = 900.0
    workspace: str = ""  # the followed workspace the targets belong to (default: the only one followed)


# A refusal that concerns one target (or is worth retrying next tick): recorded, and the other targets go on.
REFUSED_PER_TARGET = frozenset({402, 404, 409, 429, 503})
QUOTA_CODES = {"scan_quota_exceeded": "quick_scans", "audit_quota_exceeded": "audits"}


@dg.op(pool="duckdb")
def start_and_wait_for_scans(
    context: dg.OpExecutionContext, config: ScheduledScansConfig,
    scanning_service: ScanningServiceResource, history: HistoryResource,
) -> dg.Output[Any]:
    tick = config.tick or context.run_id
    skips: list[dict[str, Any]] = []

    def skip(target_id: str, kind: str | None, reason: str, detail: str, status: int | None = None) -> None:
        skips.append({"target_id": target_id, "kind": kind, "status": status, "reason": reason, "detail": detail})
        context.log.warning("target %s not scanned (%s): %s", target_id, reason, detail)

    workspace_name = config.workspace or _only_workspace(scanning_service.workspace_names())
    context.log.info("scheduled scans of workspace %s: %d target(s)", workspace_name, len(config.target_ids))
    with scanning_service.client(workspace_name) as client:
        account = client.get_account()
        budget = Budget.from_account(account, config.quota_reserve)
        features = account.get("features") or {}
        # Read live, not from the history: a project paused or a site proved since the last sync counts now.
        projects = {p["id"]: p for p in client.list_projects()}
        targets = {t["id"]: t for p in projects.values() for t in p.get("targets") or []}
        started = []
        for target_id in config.target_ids:
            target = targets.get(target_id)
            if target is None:
                skip(target_id, None, "target_not_listed", "no project of the workspace lists this target")
                continue
            if (projects.get(target.get("project_id")) or {}).get("paused"):
                skip(target_id, None, "project_paused", "its project is paused; resume it to scan")
                continue
            kind, why = fitting_kind(target, config.kind, features)
            if kind is None:
                skip(target_id, None, "kind_not_allowed", why)
                continue
            if not budget.allows(kind):
                skip(target_id, kind, "quota_reserve",
                     f"a {kind} scan would dip into the {config.quota_reserve} kept in reserve")
                continue
            try:
                scan = client.start_scan(target_id, kind=kind,
                                         idempotency_key=f"scanwatch-scheduled-{target_id}-{tick}")
            except ApiError as err:
                if err.status not in REFUSED_PER_TARGET:
                    raise
                if err.code in QUOTA_CODES:
                    budget.exhausted(QUOTA_CODES[err.code], client.get_account())
                skip(target_id, kind, err.code or str(err.status), str(err), err.status)
                continue
            budget.charge(scan)
            started.append(scan)
        deadline = time.monotonic() + config.timeout_seconds
        scans = {s["id"]: s for s in started}
        # Only queued and running scans are waited for: a status from a newer service is final here too.
        while (any(s.get("status") in UNFINISHED_SCAN_STATUSES for s in scans.values())
               and time.monotonic() < deadline):
            time.sleep(config.poll_seconds)
            for sid, s in scans.items():
                if s.get("status") in UNFINISHED_SCAN_STATUSES:
                    scans[sid] = client.get_scan(sid)
    now = datetime.now(UTC)
    workspace = (account.get("workspace") or {}).get("id")
    if not isinstance(workspace, str):
        raise dg.Failure("scheduled scans: the service's account answer names no workspace id; nothing was stored")
    with history.get_connection() as conn:
        known = dict(conn.execute(read_sql("sync/target_projects.sql")).fetchall())
        rows = [dict(s, project_id=known.get(s.get("target_id"))
                     or (targets.get(s.get("target_id")) or {}).get("project_id")) for s in scans.values()]
        merge_scans(conn, workspace, [r for r in rows if r["project_id"]], now=now)
        for row in skips:
            conn.execute(read_sql("scheduled/record_skip.sql"),
                         dict(row, workspace_id=workspace, tick=tick, observed_at=now))
    statuses = [s.get("status") for s in scans.values()]
    reasons = [s["reason"] for s in skips]
    return dg.Output(None, metadata={
        "started": len(started), "skipped": len(skips), "skipped_for_quota": reasons.count("quota_reserve"),
        "skip_reasons": ", ".join(sorted(set(reasons))) or "none",
        "reused": sum(1 for s in started if s.get("reused")),
        "audit_fallbacks": sum(1 for s in scans.values() if s.get("audit_fallback")),
        "done": statuses.count("done"), "failed": statuses.count("failed")})


@dg.job(description="Start scans on chosen targets and wait for them (off by default).")
def scheduled_scans_job() -> None:
    start_and_wait_for_scans()


def _only_workspace(names: list[str]) -> str:
    """A run that names no workspace is for the only one followed; with several, which is not a guess."""
    if len(names) != 1:
        raise dg.Failure(f"scheduled scans: name the workspace of the targets in the run config "
                         f"(ops.start_and_wait_for_scans.config.workspace: one of {', '.join(names)})")
    return names[0]


def scheduled_scans_schedule(cron: str) -> dg.ScheduleDefinition:
    """The schedule at `cron` (SCANWATCH_SCAN_CRON), off until someone turns it on."""

    @dg.schedule(job=scheduled_scans_job, cron_schedule=cron, name="scheduled_scans_schedule",
                 default_status=dg.DefaultScheduleStatus.STOPPED)
    def _schedule(context: dg.ScheduleEvaluationContext, scanning_service: ScanningServiceResource
                  ) -> list[dg.RunRequest] | dg.SkipReason:
        """One run per workspace with targets (SCANWATCH_SCAN_TARGETS for the one workspace of the two
        variables, each entry's scan_targets in the workspaces file), with that workspace's key; the tick keys
        each scan's idempotency."""
        tick = context.scheduled_execution_time.astimezone(UTC).strftime("%Y%m%dT%H%M")
        requests = [
            dg.RunRequest(run_key=f"{workspace}-{tick}", tags={"scanwatch/workspace": workspace},
                          run_config={"ops": {"start_and_wait_for_scans": {"config": {
                              "target_ids": list(targets), "tick": tick, "workspace": workspace}}}})
            for workspace, targets in scanning_service.settings().scan_targets.items() if targets
        ]
        return requests or dg.SkipReason("no scan targets: set SCANWATCH_SCAN_TARGETS, or scan_targets under "
                                         "a workspace of SCANWATCH_WORKSPACES_FILE")

    return _schedule
