"""The snapshot's Prometheus families: names, types, bounded labels. No aggregation happens here.

The snapshot already holds the numbers (DuckDB computed them); this module only names them, attaches
labels and decides types. Counters come from the history, so they survive exporter restarts without
resets, and their zero cells are present before the first event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from exporters.text import label_values

WS = ["workspace"]
PROJECT = ["workspace", "project_id", "project"]
TARGET = [*PROJECT, "target_id", "address", "kind"]
PIPELINE = ["workspace", "asset"]
# What a page about a new critical issue says. Alert rules keep only the identity (workspace, project_id,
# issue_id, change, from_severity, detected_at) and read the rest back by issue_id, because a repository
# issue's location (its commit) moves at every scan and must not make the alert fire again.
CRITICAL_NEW_LABELS = ["workspace", "project_id", "project", "issue_id", "address", "title", "family", "control_id",
                       "location", "first_seen", "change", "from_severity", "detected_at"]
CRITICAL_INFO_LABELS = ["workspace", "project_id", "project", "issue_id", "target_id", "control_id", "family",
                        "confidence"]


def num(value: Any) -> float | None:
    if value is None or isinstance(value, str):
        return None
    return float(value)


class Families:
    """Collects families by name so each is declared once, whatever order rows arrive in."""

    def __init__(self) -> None:
        self.items: dict[str, Metric] = {}

    def add(self, kind: type, name: str, doc: str, labels: list[str], values: list[str], value: Any,
            **extra: Any) -> None:
        # A label value that is not a string (a mismatched writer) would only fail later, in the encoder,
        # on every scrape: refuse it here, so the document counts as unreadable and the last good one stays.
        if not all(type(v) is str for v in values) or (kind is InfoMetricFamily and not all(
                type(v) is str for v in value.values())):
            raise TypeError(f"{name}: a label value is not a string")
        values, value = label_values(labels, values, value)  # service text: one line, capped (exporters/text.py)
        fam = self.items.get(name)
        if fam is None:
            fam = self.items[name] = kind(name, doc, labels=labels, **extra)
        if kind is InfoMetricFamily:
            fam.add_metric(values, value)
            return
        number = num(value)
        if number is not None:
            fam.add_metric(values, number)

    def gauge(self, name: str, doc: str, labels: list[str], values: list[str], value: Any) -> None:
        self.add(GaugeMetricFamily, name, doc, labels, values, value)

    def counter(self, name: str, doc: str, labels: list[str], values: list[str], value: Any) -> None:
        self.add(CounterMetricFamily, name, doc, labels, values, value)


def fill(f: Families, doc: dict, critical_info_limit: int) -> None:
    """Add every series of the snapshot document to `f` (KeyError/TypeError on a malformed one)."""
    tables: dict[str, list[dict]] = doc.get("tables", {})
    names = {w["workspace_id"]: w.get("workspace") or w["workspace_id"] for w in tables.get("workspaces", [])}

    def ws(row: dict) -> str:
        wid = row.get("workspace_id")
        return names.get(wid, wid or "") if wid else (row.get("workspace") or "")

    for sev, days in (doc.get("sla_days") or {}).items():
        f.gauge("secscan_sla_seconds", "SLA window per severity the snapshot was computed with.", ["severity"],
                [sev], days * 86400 if days is not None else None)
    _workspaces(tables, f)
    for q in tables.get("quotas", []):
        labels, values = [*WS, "quota"], [ws(q), q["quota"]]
        f.gauge("secscan_quota_limit", "Period quota (quick_scans, audits, fixes).", labels, values,
                q.get("quota_limit"))
        f.gauge("secscan_quota_used", "Period quota used.", labels, values, q.get("used"))
        f.gauge("secscan_quota_remaining", "Period quota left.", labels, values, q.get("remaining"))
    _projects(tables, f, ws)
    _issues(doc, tables, f, ws)
    _pipeline(tables, f, ws)
    _critical_arrivals(tables, f, ws)
    if critical_info_limit:
        for row in tables.get("critical_issues", [])[: critical_info_limit]:
            values = [ws(row), *(str(row.get(k) or "") for k in CRITICAL_INFO_LABELS[1:])]
            f.add(InfoMetricFamily, "secscan_critical_issue", "Open critical issues, newest first, capped "
                  "(opt-in); identifiers only, never titles, evidence or locations.", [], [],
                  dict(zip(CRITICAL_INFO_LABELS, values, strict=True)))


def iso_utc(seconds: Any) -> str:
    """Unix seconds as the ISO 8601 UTC text a notification shows ("" when unknown)."""
    number = num(seconds)
    if number is None:
        return ""
    return datetime.fromtimestamp(number, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _critical_arrivals(tables: dict, f: Families, ws: Callable[[dict], str]) -> None:
    """One series per critical issue that arrived since the baseline and is still open (capped per
    workspace in SQL), and per workspace how many arrivals the cap left out."""
    listed: dict[str, int] = {}
    total: dict[str, int] = {}
    for r in tables.get("critical_arrivals", []):
        workspace = ws(r)
        listed[workspace] = listed.get(workspace, 0) + 1
        total[workspace] = max(total.get(workspace, 0), int(r.get("workspace_arrivals") or 0))
        values = {**{k: str(r.get(k) or "") for k in CRITICAL_NEW_LABELS}, "workspace": workspace,
                  "first_seen": iso_utc(r.get("first_seen_at")), "detected_at": iso_utc(r.get("arrived_at"))}
        f.gauge("secscan_critical_issue_new", "1 per critical issue that became open and critical (new, reopened, "
                "raised or unmarked) after the first sync and within the critical SLA window, while it stays so; "
                "labels carry what a page needs.", CRITICAL_NEW_LABELS, [values[k] for k in CRITICAL_NEW_LABELS], 1)
    for w in tables.get("workspaces", []):
        workspace = w.get("workspace") or w["workspace_id"]
        unlisted = max(0, total.get(workspace, 0) - listed.get(workspace, 0))
        f.gauge("secscan_critical_issues_new_unlisted", "New critical issues left out of secscan_critical_issue_new "
                "by its per-workspace cap.", WS, [workspace], unlisted)


def _workspaces(tables: dict, f: Families) -> None:
    for w in tables.get("workspaces", []):
        v = [w.get("workspace") or w["workspace_id"]]
        f.add(InfoMetricFamily, "secscan_plan", "The workspace's plan and the contract version that answered.",
              [], [], {"workspace": v[0], "workspace_id": w["workspace_id"], "plan": w.get("plan") or "",
                       "service_version": w.get("service_version") or ""})
        f.gauge("secscan_api_access_allowed", "1 when the API answers this workspace (plan or trial).", WS, v,
                None if w.get("api_access_allowed") is None else int(bool(w["api_access_allowed"])))
        f.gauge("secscan_api_trial_end_timestamp_seconds", "End of the Solo trial; absent when not on a trial.",
                WS, v, w.get("trial_ends_at"))
        f.gauge("secscan_quota_period_start_timestamp_seconds", "Start of the current quota period.", WS, v,
                w.get("period_start"))
        f.gauge("secscan_quota_period_end_timestamp_seconds", "End of the current quota period (quotas reset).",
                WS, v, w.get("period_end"))
        for credit in ("scans", "fixes"):
            f.gauge("secscan_pack_credits", "Pack credits left, used once the period quota is exhausted.",
                    [*WS, "credit"], [v[0], credit], w.get(f"pack_credits_{credit}"))
        f.gauge("secscan_free_fixes_left", "Free fixes given once, left.", WS, v, w.get("free_fixes_left"))
        f.gauge("secscan_projects_limit", "Projects the plan allows.", WS, v, w.get("projects_limit"))
        f.gauge("secscan_projects_used", "Projects in use.", WS, v, w.get("projects_used"))
        f.gauge("secscan_projects_paused", "Paused projects.", WS, v, w.get("projects_paused"))
        try:
            features = json.loads(w.get("features") or "{}")
        except ValueError:
            features = {}
        for feature, enabled in sorted(features.items() if isinstance(features, dict) else []):
            if isinstance(enabled, bool):
                f.gauge("secscan_feature_enabled", "1 when the plan includes the feature.", [*WS, "feature"],
                        [v[0], feature], int(enabled))
        f.gauge("secscan_sync_last_success_timestamp_seconds", "End of the last successful sync run.", WS, v,
                w.get("last_success"))
        f.gauge("secscan_api_rate_limit_remaining", "Requests left in the rate-limit window at the last sync.",
                WS, v, w.get("rate_limit_remaining"))


def _projects(tables: dict, f: Families, ws: Callable[[dict], str]) -> None:
    for p in tables.get("projects", []):
        v = [ws(p), p["project_id"], p["project"]]
        f.gauge("secscan_project_score", "Project security score (absent before any scan).", PROJECT, v,
                p.get("score"))
        if p.get("grade"):
            f.add(InfoMetricFamily, "secscan_project_grade", "Project grade.", PROJECT, v, {"grade": p["grade"]})
        f.gauge("secscan_project_paused", "1 when the project is paused.", PROJECT, v,
                None if p.get("paused") is None else int(bool(p["paused"])))
        f.gauge("secscan_project_last_scan_timestamp_seconds", "Last scan of the project.", PROJECT, v,
                p.get("last_scan_at"))
    for t in tables.get("targets", []):
        v = [ws(t), t["project_id"], t["project"], t["target_id"], t.get("address") or "", t.get("kind") or ""]
        f.gauge("secscan_target_score", "Target security score (absent before any scan).", TARGET, v,
                t.get("score"))
        if t.get("grade"):
            f.add(InfoMetricFamily, "secscan_target_grade", "Target grade.", TARGET, v, {"grade": t["grade"]})
        f.gauge("secscan_target_hidden_issues", "Issues hidden until the site is proved owned (unverified "
                "sites only).", TARGET, v, t.get("hidden_issues"))
        f.gauge("secscan_target_verified", "1 when ownership of the target is proved.", TARGET, v,
                None if t.get("verified") is None else int(bool(t["verified"])))
        f.gauge("secscan_target_coverage_ratio", "Coverage (0 to 1) of the target's latest finished scan.",
                TARGET, v, t.get("coverage"))
        f.gauge("secscan_target_last_scan_failed", "1 when the target's latest finished scan failed.", TARGET, v,
                t.get("last_scan_failed"))
        f.gauge("secscan_target_last_scan_timestamp_seconds", "Last scan of the target.", TARGET, v,
                t.get("last_scan_at"))
    for s in tables.get("scans", []):
        v = [ws(s), s["project_id"], s["project"], s["kind"]]
        if s.get("finished"):
            f.counter("secscan_scans", "Scans seen finished, by kind and final status.", [*PROJECT, "kind",
                      "status"], [*v, s["status"]], s.get("scans"))
            if s["kind"] == "quick":  # the scan the service runs when an asked audit falls back
                f.counter("secscan_scans_audit_fallback", "Audits asked for that ran as quick scans because the "
                          "site's proof no longer held, by final status.", [*PROJECT, "status"],
                          [*v[:3], s["status"]], s.get("audit_fallback"))
        else:
            f.gauge("secscan_scans_pending", "Scans not finished yet, by kind and status.", [*PROJECT, "kind",
                    "status"], [*v, s["status"]], s.get("scans"))


def _issues(doc: dict, tables: dict, f: Families, ws: Callable[[dict], str]) -> None:
    sev_labels = [*PROJECT, "severity"]
    for r in tables.get("issue_severity", []):
        v = [ws(r), r["project_id"], r["project"], r["severity"]]
        f.gauge("secscan_issues_open", "Open issues.", sev_labels, v, r.get("open"))
        f.counter("secscan_issues_detected", "Issues ever seen, by the severity they were first seen with.",
                  sev_labels, v, r.get("detected"))
        f.gauge("secscan_issues_oldest_open_age_seconds", "Age of the oldest open issue (0 when none).",
                sev_labels, v, r.get("oldest_open_age"))
        if r.get("sla_days") is not None:
            f.gauge("secscan_issues_sla_breached", "Open issues older than their severity's SLA.", sev_labels, v,
                    r.get("sla_breached"))
            f.gauge("secscan_issues_sla_due_soon", "Open issues within the last quarter of their SLA window, "
                    "not yet breached.", sev_labels, v, r.get("sla_due_soon"))
    for r in tables.get("issue_status", []):
        f.gauge("secscan_issues_by_status", "Issues by current status and severity.", [*PROJECT, "status",
                "severity"], [ws(r), r["project_id"], r["project"], r["status"], r["severity"]], r.get("issues"))
    for r in tables.get("issues_not_visible", []):
        f.gauge("secscan_issues_not_visible", "Issues the service no longer shows (site unproved, target or "
                "project removed); in no open count.", [*WS, "reason"], [ws(r), r["reason"]], r.get("issues"))
    for r in tables.get("issue_family", []):
        f.gauge("secscan_issues_open_by_family", "Open issues by family.", [*PROJECT, "family"],
                [ws(r), r["project_id"], r["project"], r["family"]], r.get("open"))
    lifecycle = (
        ("opened", "secscan_issues_opened", "Issues seen for the first time."),
        ("fixed", "secscan_issues_fixed", "Issues the service found fixed."),
        ("reopened", "secscan_issues_reopened",
         "Fixed issues the service found again (a mark undone is not a reopening)."),
        ("dismissed", "secscan_issues_dismissed", "Issues marked false positive or accepted risk."),
        ("severity_changed", "secscan_issues_severity_changed", "Severity changes, by the new severity."),
    )
    for r in tables.get("lifecycle", []):
        v = [ws(r), r["project_id"], r["project"], r["severity"]]
        for column, name, doc_text in lifecycle:
            f.counter(name, doc_text + " Counted from the history; severity at the event.", sev_labels, v,
                      r.get(column))
    bounds = [floatToGoString(b) for b in doc.get("ttf_buckets", [])]
    for r in tables.get("time_to_fix", []):
        counts = r.get("buckets") or []
        if len(counts) != len(bounds):
            continue
        buckets = [*zip(bounds, (float(c) for c in counts), strict=True), ("+Inf", float(r.get("count") or 0))]
        fam = f.items.get("secscan_issue_time_to_fix_seconds")
        if fam is None:
            fam = f.items["secscan_issue_time_to_fix_seconds"] = HistogramMetricFamily(
                "secscan_issue_time_to_fix_seconds", "Time from first seen to fixed, over fixed issues.",
                labels=sev_labels)
        fam.add_metric(label_values(sev_labels, [ws(r), r["project_id"], r["project"], r["severity"]])[0], buckets,
                       sum_value=float(r.get("sum") or 0))


def _pipeline(tables: dict, f: Families, ws: Callable[[dict], str]) -> None:
    for r in tables.get("pipeline", []):
        v = [ws(r), r["asset"]]
        f.gauge("secscan_pipeline_last_success_timestamp_seconds", "Last successful materialization of the "
                "asset.", PIPELINE, v, r.get("last_success"))
        f.gauge("secscan_pipeline_last_run_timestamp_seconds", "Last materialization attempt of the asset.",
                PIPELINE, v, r.get("last_run"))
        f.gauge("secscan_pipeline_last_run_success", "1 when the asset's last run succeeded.", PIPELINE, v,
                r.get("last_run_ok"))
        f.gauge("secscan_pipeline_last_run_duration_seconds", "Duration of the asset's last run.", PIPELINE, v,
                r.get("last_duration"))
        for status, column in (("success", "runs_success"), ("failure", "runs_failure")):
            f.counter("secscan_pipeline_runs", "Asset materializations by outcome.", [*PIPELINE, "status"],
                      [*v, status], r.get(column))
        f.counter("secscan_api_requests", "Requests sent to the service.", PIPELINE, v, r.get("requests"))
        f.counter("secscan_api_retries", "Requests retried.", PIPELINE, v, r.get("retries"))
        f.counter("secscan_api_rate_limited", "429 answers met.", PIPELINE, v, r.get("rate_limited"))
        f.counter("secscan_pipeline_rows_written", "Rows written to the history.", PIPELINE, v,
                  r.get("rows_written"))
