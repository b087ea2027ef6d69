"""Asset checks on the history: invariants that, if broken, mean a merge went wrong or the service changed."""

import dagster as dg

from pipelines.resources import HistoryResource

# name -> (asset, description, SQL counting offending rows)
_CHECKS: dict[str, tuple[str, str, str]] = {
    "issue_ids_unique": ("issues", "One row per issue id.",
                         "SELECT count(*) - count(DISTINCT id) FROM issues"),
    "scan_ids_unique": ("scans", "One row per scan id.", "SELECT count(*) - count(DISTINCT id) FROM scans"),
    "fixed_exactly_when_fixed_at": (
        "issues", "An issue is `fixed` exactly when `fixed_at` is set.",
        "SELECT count(*) FROM issues WHERE (status = 'fixed') <> (fixed_at IS NOT NULL)"),
    "last_seen_not_before_first_seen": (
        "issues", "`last_seen_at >= first_seen_at` for every issue.",
        "SELECT count(*) FROM issues WHERE last_seen_at < first_seen_at"),
    "issue_targets_exist": (
        "issues", "Every issue's target is in `targets`.",
        "SELECT count(*) FROM issues i LEFT JOIN targets t ON t.id = i.target_id WHERE t.id IS NULL"),
    "no_issues_of_unverified_targets": (
        "issues", "No issue row was read while its target was unproved (the service hides those issues).",
        "SELECT count(*) FROM issues i JOIN targets t ON t.id = i.target_id "
        "WHERE t.kind = 'domain' AND NOT t.verified AND t.removed_at IS NULL "
        "AND i.last_observed_at >= t.last_observed_at"),
}


def _make(name: str, asset: str, description: str, sql: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name=name, description=description, blocking=False, pool="duckdb")
    def _check(history: HistoryResource) -> dg.AssetCheckResult:
        with history.get_connection() as conn:
            bad = conn.execute(sql).fetchall()[0][0] or 0
        return dg.AssetCheckResult(passed=bad == 0, metadata={"offending_rows": bad})

    return _check


history_checks = [_make(name, *spec) for name, spec in _CHECKS.items()]
