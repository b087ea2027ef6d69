"""Asset checks on the history: invariants that, if broken, mean a merge went wrong or the service changed."""

from collections.abc import Collection, Iterator

import dagster as dg

from pipelines.core.sqlfiles import read_sql
from pipelines.defs.resources import HistoryResource, ScanningServiceResource
from pipelines.storage.workspaces import current_workspace

# name -> (asset, description); the rows breaking it are counted by the column NAME of sql/checks/ASSET.sql.
CHECKS: dict[str, tuple[str, str]] = {
    "issue_ids_unique": ("issues", "One row per issue id."),
    "scan_ids_unique": ("scans", "One row per scan id."),
    "fixed_exactly_when_fixed_at": ("issues", "An issue is `fixed` exactly when `fixed_at` is set."),
    "last_seen_not_before_first_seen": ("issues", "`last_seen_at >= first_seen_at` for every issue."),
    "issue_targets_exist": ("issues", "Every issue's target is in `targets`."),
    "no_issues_of_unverified_targets": (
        "issues", "No issue row was read while its target was unproved (the service hides those issues)."),
}


@dg.multi_asset_check(
    specs=[dg.AssetCheckSpec(name, asset=asset, description=description, blocking=False)
           for name, (asset, description) in CHECKS.items()],
    can_subset=True, pool="duckdb", name="history_checks",
)
def _history_checks(context: dg.AssetCheckExecutionContext, history: HistoryResource,
                    scanning_service: ScanningServiceResource) -> Iterator[dg.AssetCheckResult]:
    """Every selected check in one step and on one connection, and the checks of one table in one pass over
    it: a step or a DuckDB open apiece cost far more than the queries, and a pass apiece over the issues
    most of the checks' time on PostgreSQL. A workspace's run checks that workspace's rows: a pass over every
    workspace's at each run made the checks cost grow with the number of workspaces followed (a run of no
    workspace, materialized by hand, checks them all)."""
    selected = {key.name for key in context.selected_asset_check_keys}
    workspace = context.op_execution_context.run.tags.get("dagster/partition")
    counts = count_breaks(history, scanning_service, workspace, selected)
    for name, (asset, _) in CHECKS.items():
        if name in selected:
            bad = counts[name]
            yield dg.AssetCheckResult(asset_key=asset, check_name=name, passed=bad == 0,
                                      metadata={"offending_rows": bad})


def count_breaks(history: HistoryResource, scanning_service: ScanningServiceResource, workspace: str | None,
                 selected: Collection[str]) -> dict[str, int]:
    """The rows breaking each selected check, whoever runs the checks. Every count is read before the first
    result is handed to Dagster: Dagster handles each result (its events, its storage) while the checks wait,
    and the connection held meanwhile held DuckDB's one writer for 40 ms of Python a workspace, while the
    other runs' merges waited for it."""
    counts: dict[str, int] = {}
    with history.get_connection() as conn:
        workspace_id = (current_workspace(conn, scanning_service.workspace(workspace).label)
                        if workspace is not None else None)
        for asset in dict.fromkeys(asset for name, (asset, _) in CHECKS.items() if name in selected):
            cursor = conn.execute(read_sql(f"checks/{asset}.sql"),
                                  {"workspace_id": workspace_id, "every": workspace is None})
            counts.update(zip((column[0] for column in cursor.description), cursor.fetchall()[0], strict=True))
    return {name: int(counts[name] or 0) for name in CHECKS if name in selected}


history_checks = [_history_checks]
