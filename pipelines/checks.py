"""Asset checks on the history: invariants that, if broken, mean a merge went wrong or the service changed."""

import dagster as dg

from pipelines.resources import HistoryResource
from pipelines.sqlfiles import read_sql

# name -> (asset, description); the SQL counting offending rows is sql/checks/NAME.sql.
_CHECKS: dict[str, tuple[str, str]] = {
    "issue_ids_unique": ("issues", "One row per issue id."),
    "scan_ids_unique": ("scans", "One row per scan id."),
    "fixed_exactly_when_fixed_at": ("issues", "An issue is `fixed` exactly when `fixed_at` is set."),
    "last_seen_not_before_first_seen": ("issues", "`last_seen_at >= first_seen_at` for every issue."),
    "issue_targets_exist": ("issues", "Every issue's target is in `targets`."),
    "no_issues_of_unverified_targets": (
        "issues", "No issue row was read while its target was unproved (the service hides those issues)."),
}


def _make(name: str, asset: str, description: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name=name, description=description, blocking=False, pool="duckdb")
    def _check(history: HistoryResource) -> dg.AssetCheckResult:
        with history.get_connection() as conn:
            bad = conn.execute(read_sql(f"checks/{name}.sql")).fetchall()[0][0] or 0
        return dg.AssetCheckResult(passed=bad == 0, metadata={"offending_rows": bad})

    return _check


history_checks = [_make(name, *spec) for name, spec in _CHECKS.items()]
