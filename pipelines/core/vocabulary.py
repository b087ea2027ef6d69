"""The service's words scanwatch reasons with, and the SLA policy: the one definition everything reads.

Python code imports these names. SQL reads the same values from the reference tables `severities`,
`issue_statuses`, `scan_statuses` and `sla_policy` (created by a migration; `storage.write_vocabulary`
rewrites the first three when the history is opened for writing and their copy differs, and every metrics
snapshot writes the policy it was computed with into `sla_policy`). So the cookbook, `/metrics` and the alert
built on it always count SLA breaches the same way. The exporter reads only the snapshot, which carries the
result.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Worst first: the order of every listing by severity.
SEVERITIES: tuple[str, ...] = ("critical", "high", "medium", "low", "info")
ISSUE_STATUSES: tuple[str, ...] = ("open", "fixed", "false_positive", "accepted_risk")
# Marked by a person: the issue is still found but leaves the open count and the score's open work.
DISMISSED_STATUSES: tuple[str, ...] = ("false_positive", "accepted_risk")
# The contract lists queued, done and failed; running is accepted too (a service may show it).
SCAN_STATUSES: tuple[str, ...] = ("queued", "running", "done", "failed")
FINISHED_SCAN_STATUSES: tuple[str, ...] = ("done", "failed")
# Worth polling again; a status from a newer service is neither, so it is stored and never polled forever.
UNFINISHED_SCAN_STATUSES: tuple[str, ...] = tuple(s for s in SCAN_STATUSES if s not in FINISHED_SCAN_STATUSES)

# Why scanwatch holds an issue the service no longer shows (`issues.hidden_reason`, and the `hidden` event's
# to_value): its site lost its proof (the service hides an unproved site's issues), or GET /projects stopped
# listing its target or project. Such an issue keeps its status and leaves every open count;
# `secscan_issues_not_visible` counts it under its reason, every reason present at 0.
HIDDEN_UNVERIFIED = "unverified"
HIDDEN_TARGET_REMOVED = "target_removed"
HIDDEN_PROJECT_REMOVED = "project_removed"
HIDDEN_REASONS: tuple[str, ...] = (HIDDEN_UNVERIFIED, HIDDEN_TARGET_REMOVED, HIDDEN_PROJECT_REMOVED)
# Set aside by a removal: the issue's past still counts in the reconstruction (docs/backfill.md).
REMOVAL_REASONS: tuple[str, ...] = (HIDDEN_TARGET_REMOVED, HIDDEN_PROJECT_REMOVED)


def hidden_reason_params() -> dict[str, object]:
    """The SQL parameters that name the hidden reasons: `$hidden_reasons`, `$removal_reasons`, and one per
    reason (`$unverified`, `$target_removed`, `$project_removed`) for the merge that assigns them."""
    return {"hidden_reasons": list(HIDDEN_REASONS), "removal_reasons": list(REMOVAL_REASONS),
            **{reason: reason for reason in HIDDEN_REASONS}}


# How far back the service lists scans (the contract's Limits): 30 days on Free, one year on Solo and Pro
# (366 days holds a leap year), and a plan this version does not know gets the year. Nothing scanwatch
# rebuilds of the past reaches further back than this before its first sync, whatever dates a record carries.
FREE_SCAN_HISTORY_DAYS = 30
SCAN_HISTORY_DAYS = 366


def history_days_params() -> dict[str, int]:
    """The SQL parameters `$free_history_days` and `$history_days` of the reconstruction's bounds."""
    return {"free_history_days": FREE_SCAN_HISTORY_DAYS, "history_days": SCAN_HISTORY_DAYS}


# Days an open issue may stay open, from the service's first_seen_at; info issues have none.
DEFAULT_SLA_DAYS: dict[str, int] = {"critical": 7, "high": 30, "medium": 90, "low": 180}
SLA_DAYS_VARIABLE = "SCANWATCH_SLA_DAYS"
MAX_SLA_DAYS = 3650  # ten years: longer is no SLA, and day counts past it overflow the SQL's intervals


def sla_policy(env: Mapping[str, str] | None = None, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
    """The SLA in days per severity: the defaults, then `SCANWATCH_SLA_DAYS` ("critical=3,high=14"), then
    `overrides` (the snapshot asset's config). A malformed value is one error naming the variable."""
    env = os.environ if env is None else env
    sla = dict(DEFAULT_SLA_DAYS)
    text = (env.get(SLA_DAYS_VARIABLE) or "").strip()
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        key = key.strip().lower()
        value = value.strip()
        if key not in sla or not (value.isascii() and value.isdigit()) or not 0 < int(value) <= MAX_SLA_DAYS:
            raise ValueError(
                f"{SLA_DAYS_VARIABLE}: {part[:40]!r} is not severity=days with severity in {', '.join(sla)} "
                f"and days a whole number from 1 to {MAX_SLA_DAYS}"
            )
        sla[key] = int(value)
    for key, days in (overrides or {}).items():
        if key not in sla or not 0 < int(days) <= MAX_SLA_DAYS:
            raise ValueError(f"sla_days: {key}={days} is not a severity in {', '.join(sla)} with days from 1 "
                             f"to {MAX_SLA_DAYS}")
        sla[key] = int(days)
    return sla
