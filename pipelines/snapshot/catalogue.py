"""The metric catalogue: every series scanwatch serves or backfills, declared once, as data.

Each `Series` says its name, type, help and labels, and where its value comes from: a table of the snapshot
and a column of it (or a function of the row), like a json_exporter module. `families.fill` is the one loop
that turns a snapshot document into the families /metrics serves; the backfill writes the series marked
`past` with these same names, help and labels; the README's table, the alert and recording rules, the
dashboards and the Grafana alert rule are checked against this list by the test suite
(tests/catalogue/). The exporter's own health series are declared here too, with no table.

Label values are the row's column of the label's name unless `sources` says otherwise. `workspace` is the
label the views layer gives the workspace (sql/views/workspace_labels.sql); every snapshot row carries it.
`team` is the project's team now (sql/views/project_owners_now.sql, docs/ownership.md): one more label on
every project- and issue-level series, never one more series, since a project has one team at a time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Row = Mapping[str, Any]
# A snapshot document (pipelines/snapshot/format.py): JSON, so its values are whatever JSON holds.
Document = dict[str, Any]

WS = ("workspace",)
PROJECT = ("workspace", "team", "project_id", "project")
TARGET = (*PROJECT, "target_id", "address", "kind")
PIPELINE = ("workspace", "asset")
# What a page about a new critical issue says. Alert rules keep only the identity (workspace, project_id,
# issue_id, change, from_severity, detected_at) and read the rest back by issue_id, because a repository
# issue's location (its commit) moves at every scan and must not make the alert fire again.
CRITICAL_NEW_LABELS = ("workspace", "team", "project_id", "project", "issue_id", "address", "title", "family",
                       "control_id", "location", "first_seen", "change", "from_severity", "detected_at")
CRITICAL_INFO_LABELS = ("workspace", "team", "project_id", "project", "issue_id", "target_id", "control_id", "family",
                        "confidence")

# Per workspace, the most open critical issues a snapshot lists for the opt-in `secscan_critical_issue_info`
# (the exporter's `--critical-issue-info N` serves at most N of them).
CRITICAL_INFO_LIMIT = 50
# Per workspace, the most new critical issues listed by `secscan_critical_issue_new` (SecscanNewCriticalIssue
# pages on each listed one; `secscan_critical_issues_new_unlisted` counts the rest).
CRITICAL_NEW_LIMIT = 100
# Upper bounds of the time-to-fix histogram, seconds: 1h, 4h, 12h, 1d, 3d, 7d, 14d, 30d, 90d, 180d, 365d.
TTF_BUCKETS: tuple[float, ...] = (
    3600.0, 14400.0, 43200.0, 86400.0, 259200.0, 604800.0, 1209600.0, 2592000.0, 7776000.0, 15552000.0,
    31536000.0,
)


@dataclass(frozen=True)
class Series:
    """One family. `name` is the family's name (a counter's samples add `_total`, an info's `_info`)."""

    name: str
    type: str  # gauge, counter, info, histogram
    help: str
    labels: tuple[str, ...]
    table: str | None = None  # the snapshot table its rows come from; None: the exporter's own (health)
    value: str | Callable[[Row], Any] = ""  # a column of the row, or a function of it
    when: Callable[[Row], bool] | None = None  # only the rows where this holds
    sources: Mapping[str, str | Callable[[Row], str]] = field(default_factory=dict)  # label -> column or function
    # (document, table rows, info limit)
    rows: Callable[[Document, Sequence[Row], int], Iterable[Row]] | None = None
    once: bool = False  # global: served from one part only, never once per workspace
    # The backfill writes its past: the `source` of sql/backfill/prometheus_series.sql's rows that carry it (the
    # SQL names what it computes; the metric's name is this catalogue's alone). "": no past.
    past: str = ""

    @property
    def exposed(self) -> tuple[str, ...]:
        """The metric names Prometheus stores for this family."""
        if self.type == "counter":
            return (f"{self.name}_total",)
        if self.type == "info":
            return (f"{self.name}_info",)
        if self.type == "histogram":
            return tuple(f"{self.name}_{s}" for s in ("bucket", "sum", "count"))
        return (self.name,)


@dataclass(frozen=True)
class RuleSeries:
    """A recording rule's output the backfill writes from the history, because the counter its rule reads
    has no past: `window` and `by` are read from the rule itself (prometheus/rules/), `source` names the
    column of sql/backfill/prometheus_series.sql that counts the counter's events."""

    record: str
    counter: str
    source: str


def iso_utc(seconds: Any) -> str:
    """Unix seconds as the ISO 8601 UTC text a notification shows ("" when unknown)."""
    if seconds is None or isinstance(seconds, str):
        return ""
    return datetime.fromtimestamp(float(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _flag(column: str) -> Callable[[Row], Any]:
    return lambda r: None if r.get(column) is None else int(bool(r[column]))


def _text(column: str) -> Callable[[Row], str]:
    return lambda r: str(r.get(column) or "")


def _constant(value: str) -> Callable[[Row], str]:
    return lambda _r: value


def _sla_seconds(doc: Document, _rows: Sequence[Row], _limit: int) -> Iterable[Row]:
    """Every SLA profile's window: `default` (SCANWATCH_SLA_DAYS), then the ownership map's named profiles,
    a severity a profile leaves out at the default's days."""
    default = doc.get("sla_days") or {}
    profiles = {"default": {}, **(doc.get("sla_profiles") or {})}
    for profile, own in profiles.items():
        for severity, days in default.items():
            days = own.get(severity, days)
            yield {"profile": profile, "severity": severity, "seconds": days * 86400 if days is not None else None}


def _features(_doc: Document, rows: Sequence[Row], _limit: int) -> Iterable[Row]:
    for w in rows:
        try:
            features = json.loads(w.get("features") or "{}")
        except ValueError:
            features = {}
        for feature, enabled in sorted(features.items() if isinstance(features, dict) else []):
            if isinstance(enabled, bool):
                yield {"workspace": w["workspace"], "feature": feature, "enabled": int(enabled)}


def _unlisted(doc: Document, rows: Sequence[Row], _limit: int) -> Iterable[Row]:
    """Per workspace, the arrivals its cap left out of `secscan_critical_issue_new`."""
    listed: dict[str, int] = {}
    total: dict[str, int] = {}
    for r in doc.get("tables", {}).get("critical_arrivals", []):
        listed[r["workspace"]] = listed.get(r["workspace"], 0) + 1
        total[r["workspace"]] = max(total.get(r["workspace"], 0), int(r.get("workspace_arrivals") or 0))
    for w in rows:
        name = w["workspace"]
        yield {"workspace": name, "unlisted": max(0, total.get(name, 0) - listed.get(name, 0))}


def _first(_doc: Document, rows: Sequence[Row], limit: int) -> Iterable[Row]:
    return rows[:limit]


def _project(name: str, type_: str, help_: str, value: str | Callable[[Row], Any], **kw: Any) -> Series:
    return Series(name, type_, help_, PROJECT, "projects", value, **kw)


def _target(name: str, type_: str, help_: str, value: str | Callable[[Row], Any], **kw: Any) -> Series:
    return Series(name, type_, help_, TARGET, "targets", value, **kw)


def _severity(name: str, type_: str, help_: str, table: str, value: str, **kw: Any) -> Series:
    return Series(name, type_, help_, (*PROJECT, "severity"), table, value, **kw)


def _pipeline(name: str, type_: str, help_: str, value: str, **kw: Any) -> Series:
    return Series(name, type_, help_, PIPELINE, "pipeline", value, **kw)


def _workspace(name: str, type_: str, help_: str, value: str | Callable[[Row], Any], **kw: Any) -> Series:
    return Series(name, type_, help_, WS, "workspaces", value, **kw)


_EVENTS = " Counted from the history; severity at the event."

SERIES: tuple[Series, ...] = (
    Series("secscan_sla_seconds", "gauge", "SLA window per SLA profile and severity the snapshot was computed with "
           "(profile default: SCANWATCH_SLA_DAYS).", ("profile", "severity"), "workspaces", "seconds",
           rows=_sla_seconds, once=True),
    Series("secscan_plan", "info", "The workspace's plan and the contract version that answered.",
           ("workspace", "workspace_id", "plan", "service_version"), "workspaces", "",
           sources={"plan": _text("plan"), "service_version": _text("service_version")}),
    _workspace("secscan_api_access_allowed", "gauge", "1 when the API answers this workspace (plan or trial).",
               _flag("api_access_allowed")),
    _workspace("secscan_api_trial_end_timestamp_seconds", "gauge", "End of the Solo trial; absent when not on a "
               "trial.", "trial_ends_at"),
    _workspace("secscan_quota_period_start_timestamp_seconds", "gauge", "Start of the current quota period.",
               "period_start"),
    _workspace("secscan_quota_period_end_timestamp_seconds", "gauge", "End of the current quota period (quotas "
               "reset).", "period_end"),
    *(Series("secscan_pack_credits", "gauge", "Pack credits left, used once the period quota is exhausted.",
             (*WS, "credit"), "workspaces", f"pack_credits_{credit}", sources={"credit": _constant(credit)})
      for credit in ("scans", "fixes")),
    _workspace("secscan_free_fixes_left", "gauge", "Free fixes given once, left.", "free_fixes_left"),
    _workspace("secscan_projects_limit", "gauge", "Projects the plan allows.", "projects_limit"),
    _workspace("secscan_projects_used", "gauge", "Projects in use.", "projects_used"),
    _workspace("secscan_projects_paused", "gauge", "Paused projects.", "projects_paused"),
    _workspace("secscan_projects_unowned", "gauge", "Listed projects no rule of the ownership map claims (their "
               "team is the default team).", "projects_unowned"),
    Series("secscan_feature_enabled", "gauge", "1 when the plan includes the feature.", (*WS, "feature"),
           "workspaces", "enabled", rows=_features),
    _workspace("secscan_sync_last_success_timestamp_seconds", "gauge", "End of the last successful sync run.",
               "last_success"),
    _workspace("secscan_api_rate_limit_remaining", "gauge", "Requests left in the rate-limit window at the last "
               "sync.", "rate_limit_remaining"),
    Series("secscan_quota_limit", "gauge", "Period quota (quick_scans, audits, fixes).", (*WS, "quota"), "quotas",
           "quota_limit", past="quota_limit"),
    Series("secscan_quota_used", "gauge", "Period quota used.", (*WS, "quota"), "quotas", "used", past="quota_used"),
    Series("secscan_quota_remaining", "gauge", "Period quota left.", (*WS, "quota"), "quotas", "remaining",
           past="quota_remaining"),
    _project("secscan_project_score", "gauge", "Project security score (absent before any scan).", "score",
             past="project_score"),
    Series("secscan_project_grade", "info", "Project grade.", (*PROJECT, "grade"), "projects",
           when=lambda r: bool(r.get("grade"))),
    _project("secscan_project_paused", "gauge", "1 when the project is paused.", _flag("paused")),
    _project("secscan_project_last_scan_timestamp_seconds", "gauge", "Last scan of the project.", "last_scan_at"),
    _target("secscan_target_score", "gauge", "Target security score (absent before any scan).", "score",
            past="target_score", sources={"address": _text("address"), "kind": _text("kind")}),
    Series("secscan_target_grade", "info", "Target grade.", (*TARGET, "grade"), "targets",
           when=lambda r: bool(r.get("grade")), sources={"address": _text("address"), "kind": _text("kind")}),
    *(_target(name, type_, help_, value, sources={"address": _text("address"), "kind": _text("kind")}, **kw)
      for name, type_, help_, value, kw in (
          ("secscan_target_hidden_issues", "gauge", "Issues hidden until the site is proved owned (unverified "
           "sites only).", "hidden_issues", {}),
          ("secscan_target_verified", "gauge", "1 when ownership of the target is proved.", _flag("verified"), {}),
          ("secscan_target_coverage_ratio", "gauge", "Coverage (0 to 1) of the target's latest finished scan.",
           "coverage", {}),
          ("secscan_target_last_scan_failed", "gauge", "1 when the target's latest finished scan failed.",
           "last_scan_failed", {}),
          ("secscan_target_last_scan_timestamp_seconds", "gauge", "Last scan of the target.", "last_scan_at", {}),
      )),
    Series("secscan_scans", "counter", "Scans seen finished, by kind and final status.", (*PROJECT, "kind", "status"),
           "scans", "scans", when=lambda r: bool(r.get("finished"))),
    # The scan the service runs when an asked audit falls back is a quick one.
    Series("secscan_scans_audit_fallback", "counter", "Audits asked for that ran as quick scans because the site's "
           "proof no longer held, by final status.", (*PROJECT, "status"), "scans", "audit_fallback",
           when=lambda r: bool(r.get("finished")) and r.get("kind") == "quick"),
    Series("secscan_scans_pending", "gauge", "Scans not finished yet, by kind and status.",
           (*PROJECT, "kind", "status"), "scans", "scans", when=lambda r: not r.get("finished")),
    _severity("secscan_issues_open", "gauge", "Open issues.", "issue_severity", "open", past="issues_open"),
    _severity("secscan_issues_detected", "counter", "Issues ever seen, by the severity they were first seen with.",
              "issue_severity", "detected"),
    _severity("secscan_issues_oldest_open_age_seconds", "gauge", "Age of the oldest open issue (0 when none).",
              "issue_severity", "oldest_open_age"),
    _severity("secscan_issues_sla_breached", "gauge", "Open issues older than their severity's SLA.",
              "issue_severity", "sla_breached", when=lambda r: r.get("sla_days") is not None),
    _severity("secscan_issues_sla_due_soon", "gauge", "Open issues within the last quarter of their SLA window, "
              "not yet breached.", "issue_severity", "sla_due_soon", when=lambda r: r.get("sla_days") is not None),
    Series("secscan_issues_by_status", "gauge", "Issues by current status and severity.",
           (*PROJECT, "status", "severity"), "issue_status", "issues"),
    Series("secscan_issues_not_visible", "gauge", "Issues the service no longer shows (site unproved, target or "
           "project removed); in no open count.", (*WS, "reason"), "issues_not_visible", "issues"),
    Series("secscan_issues_open_by_family", "gauge", "Open issues by family.", (*PROJECT, "family"), "issue_family",
           "open"),
    _severity("secscan_issues_opened", "counter", "Issues seen for the first time." + _EVENTS, "lifecycle", "opened"),
    _severity("secscan_issues_fixed", "counter", "Issues the service found fixed." + _EVENTS, "lifecycle", "fixed"),
    _severity("secscan_issues_reopened", "counter", "Fixed issues the service found again (a mark undone is not a "
              "reopening)." + _EVENTS, "lifecycle", "reopened"),
    _severity("secscan_issues_dismissed", "counter", "Issues marked false positive or accepted risk." + _EVENTS,
              "lifecycle", "dismissed"),
    _severity("secscan_issues_severity_changed", "counter", "Severity changes, by the new severity." + _EVENTS,
              "lifecycle", "severity_changed"),
    _severity("secscan_issue_time_to_fix_seconds", "histogram", "Time from first seen to fixed, over fixed issues.",
              "time_to_fix", "buckets"),
    _pipeline("secscan_pipeline_last_success_timestamp_seconds", "gauge", "Last successful materialization of the "
              "asset.", "last_success"),
    _pipeline("secscan_pipeline_last_run_timestamp_seconds", "gauge", "Last materialization attempt of the asset.",
              "last_run"),
    _pipeline("secscan_pipeline_last_run_success", "gauge", "1 when the asset's last run succeeded.", "last_run_ok"),
    _pipeline("secscan_pipeline_last_run_duration_seconds", "gauge", "Duration of the asset's last run.",
              "last_duration"),
    *(Series("secscan_pipeline_runs", "counter", "Asset materializations by outcome.", (*PIPELINE, "status"),
             "pipeline", f"runs_{status}", sources={"status": _constant(status)}) for status in ("success", "failure")),
    _pipeline("secscan_api_requests", "counter", "Requests sent to the service.", "requests"),
    _pipeline("secscan_api_retries", "counter", "Requests retried.", "retries"),
    _pipeline("secscan_api_rate_limited", "counter", "429 answers met.", "rate_limited"),
    _pipeline("secscan_pipeline_rows_written", "counter", "Rows written to the history.", "rows_written"),
    Series("secscan_critical_issue_new", "gauge", "1 per critical issue that became open and critical (new, reopened, "
           "raised or unmarked) after the first sync and within the critical SLA window, while it stays so; labels "
           "carry what a page needs.", CRITICAL_NEW_LABELS, "critical_arrivals", lambda _r: 1,
           sources={**{k: _text(k) for k in CRITICAL_NEW_LABELS[1:]},
                    "first_seen": lambda r: iso_utc(r.get("first_seen_at")),
                    "detected_at": lambda r: iso_utc(r.get("arrived_at"))}),
    Series("secscan_critical_issues_new_unlisted", "gauge", "New critical issues left out of "
           "secscan_critical_issue_new by its per-workspace cap.", WS, "workspaces", "unlisted", rows=_unlisted),
    Series("secscan_critical_issue", "info", "Open critical issues, newest first, capped (opt-in); identifiers only, "
           "never titles, evidence or locations.", CRITICAL_INFO_LABELS, "critical_issues", "",
           sources={k: _text(k) for k in CRITICAL_INFO_LABELS[1:]}, rows=_first),
    # The exporter's own health, per part of the snapshot (no table: computed on every scrape).
    Series("secscan_snapshot_readable", "gauge", "1 when the workspace's part of the snapshot could be read and "
           "parsed, 0 when the exporter is serving its last good copy; without a workspace, 0 while no part can be "
           "read at all.", WS),
    Series("secscan_snapshot_load_errors", "counter", "Snapshot parts that could not be loaded since the exporter "
           "started.", ()),
    Series("secscan_snapshot_generated_timestamp_seconds", "gauge", "When the pipeline built the workspace's part "
           "being served.", WS),
    Series("secscan_snapshot_age_seconds", "gauge", "Seconds since the pipeline built the workspace's part being "
           "served.", WS),
)

BY_NAME: dict[str, Series] = {}
for _s in SERIES:
    BY_NAME.setdefault(_s.name, _s)

# Recording rules whose past the backfill writes from the history (their counters have no past).
RULE_SERIES: tuple[RuleSeries, ...] = (
    RuleSeries("secscan:issues_opened:increase1d", "secscan_issues_opened", "opened"),
    RuleSeries("secscan:issues_fixed:increase1d", "secscan_issues_fixed", "fixed"),
)

def past_series() -> tuple[Series, ...]:
    """The series the backfill writes with these names, help and labels."""
    return tuple(s for s in SERIES if s.past)
