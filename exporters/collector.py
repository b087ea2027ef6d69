"""Turns the snapshot into Prometheus metric families: once per snapshot, plus health series per scrape.

Nothing here aggregates: the snapshot already holds the numbers (DuckDB computed them). This module
only names them, attaches bounded labels and decides types. Counters come from the history, so they
survive exporter restarts without resets, and their zero cells are present before the first event.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from exporters.source import SnapshotSource, SnapshotState

WS = ["workspace"]
PROJECT = ["workspace", "project_id", "project"]
TARGET = [*PROJECT, "target_id", "address", "kind"]
PIPELINE = ["workspace", "asset"]
FINAL_SCAN_STATUSES = ("done", "failed")
CRITICAL_INFO_LABELS = ["workspace", "project_id", "project", "issue_id", "target_id", "control_id", "family",
                        "confidence"]


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, str):
        return None
    return float(value)


class _Families:
    """Collects families by name so each is declared once, whatever order rows arrive in."""

    def __init__(self) -> None:
        self.items: dict[str, Metric] = {}

    def add(self, kind: type, name: str, doc: str, labels: list[str], values: list[str], value: Any,
            **extra: Any) -> None:
        fam = self.items.get(name)
        if fam is None:
            fam = self.items[name] = kind(name, doc, labels=labels, **extra)
        if kind is InfoMetricFamily:
            fam.add_metric(values, value)
            return
        number = _num(value)
        if number is not None:
            fam.add_metric(values, number)

    def gauge(self, name: str, doc: str, labels: list[str], values: list[str], value: Any) -> None:
        self.add(GaugeMetricFamily, name, doc, labels, values, value)

    def counter(self, name: str, doc: str, labels: list[str], values: list[str], value: Any) -> None:
        self.add(CounterMetricFamily, name, doc, labels, values, value)


@dataclass(frozen=True)
class _Prepared:
    """One rendering of the snapshot, ready to serve."""

    key: object  # the file identity it was rendered from
    healthy: bool  # the file parsed and rendered
    errors: int
    doc: dict | None  # the document served (the last good one when the file is not)
    body: bytes


class SecscanCollector:
    """A prometheus-client collector over a SnapshotSource.

    `critical_info_limit` > 0 turns on the opt-in `secscan_critical_issue_info` series (at most that many).
    """

    def __init__(self, source: SnapshotSource, *, critical_info_limit: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.critical_info_limit = max(0, critical_info_limit)
        self.clock = clock
        self._good: tuple[dict, _Families] | None = None  # last document that rendered, with its families
        self._bad_doc: dict | None = None
        self._render_errors = 0
        self._body: tuple[_Families, bytes] | None = None  # text exposition of self._good's families
        self._ready: _Prepared | None = None  # what HTTP scrapes serve (see exposition)
        self._refreshing = False
        self._lock = threading.Lock()  # concurrent scrapes share the bookkeeping above

    def describe(self) -> Iterable[Metric]:
        return []  # families depend on the snapshot; nothing to pre-declare

    def collect(self) -> Iterator[Metric]:
        """prometheus-client's path (generate_latest): everything evaluated now, synchronously."""
        _state, data, doc, healthy, errors = self._snapshot()
        yield from self._head(healthy, errors, doc).items.values()
        if data is not None:
            yield from data.items.values()

    def exposition(self, *, wait: bool = False) -> bytes:
        """The scrape body served over HTTP: health series rendered now, snapshot series pre-rendered.

        A scrape never waits for a new snapshot to be parsed and rendered: the one that notices the file
        changed starts that work in the background and serves the previous rendering, which the next
        scrape replaces (data a few milliseconds old, on a file rewritten every sync). Only the very first
        scrape, with nothing rendered yet, renders inline. `wait=True` always renders the file as it is.
        """
        if wait:
            ready = self._prepare()
        else:
            key = self.source.peek()
            with self._lock:
                ready = self._ready
                start = ready is not None and ready.key != key and not self._refreshing
                if start:
                    self._refreshing = True
            if ready is None:
                ready = self._prepare()
            elif start:
                threading.Thread(target=self._refresh, name="scanwatch-snapshot-render", daemon=True).start()
        from exporters.render import render

        return render(self._head(ready.healthy, ready.errors, ready.doc).items.values()) + ready.body

    def _refresh(self) -> None:
        try:
            self._prepare()
        except Exception:  # never leave scrapes without a refresh: the next change retries
            pass
        finally:
            with self._lock:
                self._refreshing = False

    def _prepare(self) -> _Prepared:
        from exporters.render import render

        state, data, doc, healthy, errors = self._snapshot()
        body = b""
        if data is not None:
            with self._lock:
                cached = self._body
            if cached is None or cached[0] is not data:
                cached = (data, render(data.items.values()))
                with self._lock:
                    self._body = cached
            body = cached[1]
        prepared = _Prepared(state.key, healthy, errors, doc, body)
        with self._lock:
            self._ready = prepared
        return prepared

    def _snapshot(self) -> tuple[SnapshotState, _Families | None, dict | None, bool, int]:
        """The state of the file, the families to serve (built once per document) and their document.

        A document that parses but does not render (a mismatched writer) counts as unreadable and the
        last good one keeps being served, so a scrape never fails.
        """
        state = self.source.get()
        doc, data, malformed = state.doc, None, False
        with self._lock:
            good = self._good
        if doc is not None:
            if good is not None and good[0] is doc:
                data = good[1]
            else:
                data = self._render(doc)
                with self._lock:
                    if data is None:
                        malformed = True
                        if doc is not self._bad_doc:
                            self._bad_doc = doc
                            self._render_errors += 1
                    else:
                        self._good = good = (doc, data)
                if data is None and good is not None:
                    doc, data = good
        with self._lock:
            errors = state.load_errors + self._render_errors
        return state, data, doc if data is not None else None, state.readable and not malformed, errors

    def _head(self, healthy: bool, errors: int, doc: dict | None) -> _Families:
        head = _Families()
        head.gauge("secscan_snapshot_readable", "1 when the current snapshot file could be read and parsed, 0 "
                   "when the exporter is serving the last good copy (or nothing).", [], [], 1 if healthy else 0)
        head.counter("secscan_snapshot_load_errors", "Snapshot files that could not be loaded since the exporter "
                     "started.", [], [], errors)
        generated = _num(doc.get("generated_at_seconds")) if doc is not None else None
        if generated is not None:
            head.gauge("secscan_snapshot_generated_timestamp_seconds", "When the pipeline built the snapshot being "
                       "served.", [], [], generated)
            head.gauge("secscan_snapshot_age_seconds", "Seconds since the pipeline built the snapshot being "
                       "served.", [], [], self.clock() - generated)
        return head

    def _render(self, doc: dict) -> _Families | None:
        f = _Families()
        try:
            self._collect_doc(doc, f)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return f

    def _collect_doc(self, doc: dict, f: _Families) -> None:
        tables: dict[str, list[dict]] = doc.get("tables", {})
        names = {w["workspace_id"]: w.get("workspace") or w["workspace_id"] for w in tables.get("workspaces", [])}

        def ws(row: dict) -> str:
            wid = row.get("workspace_id")
            return names.get(wid, wid or "") if wid else (row.get("workspace") or "")

        for sev, days in (doc.get("sla_days") or {}).items():
            f.gauge("secscan_sla_seconds", "SLA window per severity the snapshot was computed with.", ["severity"],
                    [sev], days * 86400 if days is not None else None)
        self._workspaces(tables, f)
        for q in tables.get("quotas", []):
            labels, values = [*WS, "quota"], [ws(q), q["quota"]]
            f.gauge("secscan_quota_limit", "Period quota (quick_scans, audits, fixes).", labels, values,
                    q.get("quota_limit"))
            f.gauge("secscan_quota_used", "Period quota used.", labels, values, q.get("used"))
            f.gauge("secscan_quota_remaining", "Period quota left.", labels, values, q.get("remaining"))
        self._projects(tables, f, ws)
        self._issues(doc, tables, f, ws)
        self._pipeline(tables, f, ws)
        if self.critical_info_limit:
            for row in tables.get("critical_issues", [])[: self.critical_info_limit]:
                values = [ws(row), *(str(row.get(k) or "") for k in CRITICAL_INFO_LABELS[1:])]
                f.add(InfoMetricFamily, "secscan_critical_issue", "Open critical issues, newest first, capped "
                      "(opt-in); identifiers only, never titles, evidence or locations.", [], [],
                      dict(zip(CRITICAL_INFO_LABELS, values, strict=True)))

    @staticmethod
    def _workspaces(tables: dict, f: _Families) -> None:
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

    @staticmethod
    def _projects(tables: dict, f: _Families, ws: Callable[[dict], str]) -> None:
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
            if s["status"] in FINAL_SCAN_STATUSES:
                f.counter("secscan_scans", "Scans seen finished, by kind and final status.", [*PROJECT, "kind",
                          "status"], [*v, s["status"]], s.get("scans"))
            else:
                f.gauge("secscan_scans_pending", "Scans not finished yet, by kind and status.", [*PROJECT, "kind",
                        "status"], [*v, s["status"]], s.get("scans"))

    @staticmethod
    def _issues(doc: dict, tables: dict, f: _Families, ws: Callable[[dict], str]) -> None:
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
        for r in tables.get("issue_family", []):
            f.gauge("secscan_issues_open_by_family", "Open issues by family.", [*PROJECT, "family"],
                    [ws(r), r["project_id"], r["project"], r["family"]], r.get("open"))
        lifecycle = (
            ("opened", "secscan_issues_opened", "Issues seen for the first time."),
            ("fixed", "secscan_issues_fixed", "Issues the service found fixed."),
            ("reopened", "secscan_issues_reopened", "Fixed or dismissed issues found open again."),
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
            fam.add_metric([ws(r), r["project_id"], r["project"], r["severity"]], buckets,
                           sum_value=float(r.get("sum") or 0))

    @staticmethod
    def _pipeline(tables: dict, f: _Families, ws: Callable[[dict], str]) -> None:
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
