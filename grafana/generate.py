"""Dev-only generator of the committed Grafana files: `python grafana/generate.py [--check]`.

The dashboards and the Grafana alert rule are plain JSON/YAML committed in the repo (Grafana reads them,
not this script). Generating them keeps panel layout, datasource references and the new-critical alert
(labels and runbook copied from the Prometheus rule, so the two never drift) consistent. Standard library,
PyYAML and scanwatch's vocabulary (the severities); `--check` fails when the committed files are out of date.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from pipelines.core.vocabulary import SEVERITIES

HERE = Path(__file__).resolve().parent
RULES = HERE.parent / "prometheus" / "rules" / "secscan-alerts.yml"
DS = {"type": "prometheus", "uid": "${datasource}"}
DATASOURCE_UID = "scanwatch-prometheus"
WS = 'workspace=~"$workspace"'
# The project's team (docs/ownership.md). Every panel about projects or issues follows the `team` variable; its
# All is `.*`, which a series without `team` (an exporter without the ownership map) matches too.
TEAM = 'team=~"$team"'
WT = f"{WS},{TEAM}"
PID = 'project_id="$project_id"'


class Layout:
    """Places panels left to right on Grafana's 24-column grid, wrapping rows."""

    def __init__(self) -> None:
        self.x = self.y = self.row_h = 0
        self.next_id = 1
        self.panels: list[dict] = []

    def row(self, title: str) -> None:
        self.y += self.row_h
        self.x = self.row_h = 0
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False, "panels": [],
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}})
        self.y += 1

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def add(self, panel: dict, w: int, h: int) -> None:
        if self.x + w > 24:
            self.y += self.row_h
            self.x = self.row_h = 0
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)


def target(expr: str, legend: str = "", ref: str = "A", *, instant: bool = False, table: bool = False) -> dict:
    t = {"datasource": DS, "expr": expr, "refId": ref, "legendFormat": legend or "__auto", "range": not instant,
         "instant": instant, "editorMode": "code"}
    if table:
        t["format"] = "table"
    return t


def panel(kind: str, title: str, targets: list[dict], *, unit: str = "short", description: str = "",
          options: dict | None = None, custom: dict | None = None, overrides: list | None = None,
          transformations: list | None = None, thresholds: list | None = None, mappings: list | None = None,
          datasource: dict = DS) -> dict:
    defaults: dict = {"unit": unit}
    if custom:
        defaults["custom"] = custom
    defaults["thresholds"] = {"mode": "absolute", "steps": thresholds or [{"color": "green", "value": None}]}
    if mappings:
        defaults["mappings"] = mappings
    p = {"type": kind, "title": title, "description": description, "datasource": datasource, "targets": targets,
         "fieldConfig": {"defaults": defaults, "overrides": overrides or []}, "options": options or {}}
    if transformations:
        p["transformations"] = transformations
    return p


def stat(title: str, expr: str, legend: str = "", **kw) -> dict:
    opts = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "colorMode": "value",
            "graphMode": "none", "textMode": "auto"}
    return panel("stat", title, [target(expr, legend, instant=True)], options=opts, **kw)


def series(title: str, targets: list[dict], *, stack: bool = False, bars: bool = False, **kw) -> dict:
    custom = {"drawStyle": "bars" if bars else "line", "lineWidth": 1, "fillOpacity": 60 if bars else 10,
              "stacking": {"mode": "normal" if stack else "none", "group": "A"}, "showPoints": "never",
              "spanNulls": True}
    opts = {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull"], "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"}}
    return panel("timeseries", title, targets, custom=custom, options=opts, **kw)


def table(title: str, targets: list[dict], **kw) -> dict:
    transformations = [{"id": "merge", "options": {}},
                       {"id": "organize", "options": {"excludeByName": {"Time": True, "__name__": True, "job": True,
                                                                         "instance": True}}}]
    return panel("table", title, targets, transformations=transformations,
                 options={"showHeader": True, "cellHeight": "sm"}, **kw)


def bargauge(title: str, expr: str, legend: str, **kw) -> dict:
    opts = {"orientation": "horizontal", "displayMode": "gradient", "showUnfilled": True,
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}
    return panel("bargauge", title, [target(expr, legend, instant=True)], options=opts, **kw)


RED_AT_1 = [{"color": "green", "value": None}, {"color": "red", "value": 1}]
# A severity the vocabulary gains without a colour here fails the generator (KeyError), not a panel.
_COLOR = {"critical": "dark-red", "high": "orange", "medium": "yellow", "low": "blue", "info": "gray"}
SEVERITY_COLORS = [
    {"matcher": {"id": "byName", "options": name}, "properties": [{"id": "color", "value":
                                                                  {"mode": "fixed", "fixedColor": _COLOR[name]}}]}
    for name in SEVERITIES
]


# Importable both ways. Provisioned from files, every panel reads the `datasource` variable, which picks a data
# source of its plugin (the current value below is no uid there, so Grafana takes the first it has). Through
# Grafana's import screen (or grafana.com), `__inputs` asks for that data source and Grafana writes the chosen
# uid where `${DS_...}` stands: the variable's current value. No uid is written into any panel.
PLUGINS = {  # plugin id: (name shown by Grafana's importer, the dashboard's import input)
    "prometheus": ("Prometheus", "DS_PROMETHEUS"),
    "grafana-postgresql-datasource": ("PostgreSQL", "DS_SCANWATCH_HISTORY"),
}
PANEL_NAMES = {"timeseries": "Time series", "stat": "Stat", "table": "Table", "bargauge": "Bar gauge",
               "gauge": "Gauge", "text": "Text", "piechart": "Pie chart"}
GRAFANA_VERSION = "10.4.0"  # schemaVersion 39 and the `grafana-postgresql-datasource` plugin id


def datasource_var(plugin: str = "prometheus") -> dict:
    placeholder = "${" + PLUGINS[plugin][1] + "}"
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": plugin,
            "current": {"selected": False, "text": placeholder, "value": placeholder}, "hide": 0, "refresh": 1,
            "regex": "", "options": []}


def importable(dash: dict) -> dict:
    """`__inputs` for the data source the dashboard's variable picks and `__requires` for every plugin it uses,
    in front, as Grafana's "Export for sharing externally" writes them; `id` null, as the importer wants."""
    plugin = next(v["query"] for v in dash["templating"]["list"] if v["type"] == "datasource")
    name, input_name = PLUGINS[plugin]
    kinds = sorted({p["type"] for p in dash["panels"] if p["type"] != "row"})
    requires = [{"type": "grafana", "id": "grafana", "name": "Grafana", "version": GRAFANA_VERSION},
                {"type": "datasource", "id": plugin, "name": name, "version": "1.0.0"}]
    requires += [{"type": "panel", "id": kind, "name": PANEL_NAMES[kind], "version": ""} for kind in kinds]
    inputs = [{"name": input_name, "label": name, "description": f"The {name} data source scanwatch's panels read",
               "type": "datasource", "pluginId": plugin, "pluginName": name}]
    return {"__inputs": inputs, "__requires": requires, "id": None, **dash}


def query_var(name: str, label: str, query: str, *, multi: bool, include_all: bool, regex: str = "",
              hide: int = 0) -> dict:
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": f"{name}-var", "qryType": 1 if query.startswith("label_values")
                      else 3},
            "definition": query, "refresh": 2, "regex": regex, "sort": 1, "multi": multi, "includeAll": include_all,
            "allValue": ".*" if include_all else None, "current": {}, "hide": hide, "options": []}


def team_var() -> dict:
    """The teams of the chosen workspaces' projects (docs/ownership.md), several at once or All; a project not
    scanned yet has no score but is listed (paused or not), so its team is offered too."""
    return query_var("team", "Team",
                     f'label_values({{__name__=~"secscan_project_score|secscan_project_paused",{WS}}}, team)',
                     multi=True, include_all=True)


def dashboard(uid: str, title: str, description: str, variables: list[dict], layout: Layout,
              links: list[dict]) -> dict:
    return importable({
        "uid": uid, "title": title, "description": description, "tags": ["scanwatch", "security"],
        "editable": True, "graphTooltip": 1, "schemaVersion": 39, "version": 1, "timezone": "browser",
        "time": {"from": "now-7d", "to": "now"}, "refresh": "5m", "fiscalYearStartMonth": 0, "liveNow": False,
        "templating": {"list": variables}, "annotations": {"list": []}, "links": links, "panels": layout.panels,
    })


WORKSPACE_COLUMNS = (  # (ref, header, expression per workspace, unit): the projects' columns follow the team
    ("A", "open critical", f'sum by (workspace) (secscan:issues_open:sum{{{WT},severity="critical"}})', "short"),
    ("B", "open", f"sum by (workspace) (secscan:issues_open:sum{{{WT}}})", "short"),
    ("C", "SLA breached", f"sum by (workspace) (secscan:issues_sla_breached:sum{{{WT}}})", "short"),
    ("D", "lowest score", f"min by (workspace) (secscan_project_score{{{WT}}})", "none"),
    ("E", "quota used (max)", f"max by (workspace) (secscan:quota_used:ratio{{{WS}}})", "percentunit"),
    ("F", "sync ok", f"min by (workspace) (secscan_pipeline_last_run_success{{{WS}}})", "short"),
    ("G", "since last success", f"secscan:sync_age_seconds{{{WS}}}", "s"),
)


def workspaces_table() -> dict:
    """One row per followed workspace: its posture and whether scanwatch keeps it fresh."""
    targets = [target(expr, "", ref, instant=True, table=True) for ref, _, expr, _ in WORKSPACE_COLUMNS]
    p = table("Workspaces: posture and sync health", targets, description=(
        "One row per workspace; open issues, breaches and scores count the projects of the chosen teams. "
        "'sync ok' is 0 when the last run of one of its assets failed (a revoked key, a "
        "lapsed plan): that workspace alone is stale, the others are synced as usual."))
    p["transformations"].append({"id": "organize", "options": {"renameByName": {
        f"Value #{ref}": header for ref, header, _, _ in WORKSPACE_COLUMNS}}})
    p["fieldConfig"]["overrides"] = [
        {"matcher": {"id": "byName", "options": header}, "properties": [{"id": "unit", "value": unit}]}
        for _, header, _, unit in WORKSPACE_COLUMNS]
    return p


def overview() -> dict:
    lay = Layout()
    lay.row("Workspaces")
    lay.add(workspaces_table(), 24, 6)
    lay.row("Posture")
    lay.add(stat("Open critical", f'sum(secscan:issues_open:sum{{{WT},severity="critical"}})', thresholds=RED_AT_1),
            4, 4)
    lay.add(stat("Open high", f'sum(secscan:issues_open:sum{{{WT},severity="high"}})',
                 thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]), 4, 4)
    lay.add(stat("SLA breached", f"sum(secscan:issues_sla_breached:sum{{{WT}}})", thresholds=RED_AT_1,
                 description="Open issues older than their severity's SLA (secscan_sla_seconds)."), 4, 4)
    lay.add(stat("SLA due soon", f"sum(secscan:issues_sla_due_soon:sum{{{WT}}})",
                 thresholds=[{"color": "green", "value": None}, {"color": "yellow", "value": 1}],
                 description="Open issues in the last quarter of their SLA window: act before the breach."), 4, 4)
    lay.add(stat("Hidden issues (unverified sites)", f"sum(secscan_target_hidden_issues{{{WT}}})",
                 description="Issues the service hides until the site's ownership is proved."), 4, 4)
    lay.add(stat("Lowest project score", f"min(secscan_project_score{{{WT}}})",
                 thresholds=[{"color": "red", "value": None}, {"color": "orange", "value": 50},
                             {"color": "green", "value": 80}]), 4, 4)
    lay.add(table("New critical issues (paging)", [
        target(f"secscan_critical_issue_new{{{WT}}}", "", "A", instant=True, table=True)],
        description="Critical issues that became open and critical since the first sync, within the critical SLA "
                    "window, still open: one SecscanNewCriticalIssue alert each. The location shows the latest "
                    "analysed commit."), 24, 6)
    lay.add(series("Project scores", [
        target(f"secscan_project_score{{{WT}}}", "{{project}} ({{workspace}}, {{team}})")], unit="none"), 12, 8)
    lay.add(series("Open issues by severity", [target(f"sum by (severity) (secscan:issues_open:sum{{{WT}}})",
                                                      "{{severity}}")], stack=True, overrides=SEVERITY_COLORS),
            12, 8)
    lay.add(series("New against fixed", [
        target(f"sum(increase(secscan_issues_opened_total{{{WT}}}[$__rate_interval]))"
               f" + sum(increase(secscan_issues_reopened_total{{{WT}}}[$__rate_interval]))", "new", "A"),
        target(f"-sum(increase(secscan_issues_fixed_total{{{WT}}}[$__rate_interval]))", "fixed", "B"),
    ], bars=True, description="Issues opened or reopened (up) against issues fixed (down), per interval."), 12, 8)
    lay.add(series("New and fixed per day, by severity", [
        target(f"sum by (severity) (secscan:issues_opened:increase1d{{{WS}}})", "new {{severity}}", "A"),
        target(f"sum by (severity) (secscan:issues_fixed:increase1d{{{WS}}})", "fixed {{severity}}", "B"),
    ], description="Every team of the chosen workspaces: these per-day series are kept per workspace, which "
                   "lets `scanwatch backfill-prometheus` write their past (the panel beside it follows the team)."),
        12, 8)
    lay.add(bargauge("Open issues by family", f"sum by (family) (secscan_issues_open_by_family{{{WT}}}) > 0",
                     "{{family}}"), 8, 8)
    lay.add(table("Time to fix by severity", [
        target(f"secscan:issue_time_to_fix_seconds:p50{{{WT}}}", "", "A", instant=True, table=True),
        target(f"secscan:issue_time_to_fix_seconds:p90{{{WT}}}", "", "B", instant=True, table=True),
        target(f"secscan:issue_time_to_fix_seconds:mean{{{WT}}}", "", "C", instant=True, table=True),
    ], unit="s", description="Median, 90th percentile and mean time from first seen to fixed."), 8, 8)
    lay.add(table("Oldest open issue by severity", [
        target(f"max by (workspace, team, severity) (secscan_issues_oldest_open_age_seconds{{{WT}}})", "", "A",
               instant=True, table=True)], unit="s"), 8, 8)
    lay.row("Quotas and plan")
    lay.add(bargauge("Quota used", f"secscan:quota_used:ratio{{{WS}}}", "{{workspace}} {{quota}}",
                     unit="percentunit", thresholds=[{"color": "green", "value": None},
                                                     {"color": "orange", "value": 0.75}, {"color": "red",
                                                                                          "value": 0.9}]), 8, 6)
    lay.add(series("Quota remaining", [target(f"secscan_quota_remaining{{{WS}}}", "{{workspace}} {{quota}}")]),
            8, 6)
    lay.add(stat("Quota period ends", f"secscan_quota_period_end_timestamp_seconds{{{WS}}} * 1000",
                 "{{workspace}}", unit="dateTimeFromNow"), 4, 3)
    lay.add(stat("Trial ends", f"secscan_api_trial_end_timestamp_seconds{{{WS}}} * 1000", "{{workspace}}",
                 unit="dateTimeFromNow", description="Only for a workspace on the Solo trial."), 4, 3)
    lay.add(stat("API access", f"secscan_api_access_allowed{{{WS}}}", "{{workspace}}",
                 mappings=[{"type": "value", "options": {"0": {"text": "lost", "color": "red"},
                                                         "1": {"text": "allowed", "color": "green"}}}]), 4, 3)
    lay.add(panel("stat", "Plan", [target(f"secscan_plan_info{{{WS}}}", "{{workspace}}: {{plan}}", instant=True)],
                  options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                           "textMode": "name", "colorMode": "none", "graphMode": "none"}), 4, 3)
    lay.add(stat("Projects used / limit", f"secscan_projects_used{{{WS}}} / secscan_projects_limit{{{WS}}}",
                 "{{workspace}}", unit="percentunit"), 4, 3)
    lay.add(stat("Paused projects", f"secscan_projects_paused{{{WS}}}", "{{workspace}}"), 4, 3)
    lay.add(stat("Unowned projects", f"secscan_projects_unowned{{{WS}}}", "{{workspace}}",
                 thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}],
                 description="Projects no rule of the ownership map claims: their pages take the default route "
                             "(docs/ownership.md)."), 4, 3)
    lay.add(stat("Pack credits", f"secscan_pack_credits{{{WS}}}", "{{workspace}} {{credit}}"), 4, 3)
    lay.row("Sync health")
    lay.add(stat("Since last successful sync", f"secscan:sync_age_seconds{{{WS}}}", "{{workspace}}", unit="s",
                 thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1800},
                             {"color": "red", "value": 3600}]), 6, 4)
    lay.add(stat("Rate limit remaining", f"secscan_api_rate_limit_remaining{{{WS}}}", "{{workspace}}"), 6, 4)
    lay.add(stat("Snapshot age", f"max by (workspace) (secscan_snapshot_age_seconds{{{WS}}})", "{{workspace}}",
                 unit="s"), 6, 4)
    lay.add(stat("Snapshot readable", f"min by (workspace) (secscan_snapshot_readable{{{WS}}})", "{{workspace}}",
                 mappings=[{"type": "value", "options": {"0": {"text": "no: serving last good", "color": "red"},
                                                         "1": {"text": "yes", "color": "green"}}}]), 6, 4)
    lay.add(series("API requests by asset", [
        target(f"sum by (asset) (increase(secscan_api_requests_total{{{WS}}}[$__rate_interval]))", "{{asset}}")],
        bars=True, stack=True), 8, 8)
    lay.add(series("429 answers and retries", [
        target(f"sum(increase(secscan_api_rate_limited_total{{{WS}}}[$__rate_interval]))", "429s", "A"),
        target(f"sum(increase(secscan_api_retries_total{{{WS}}}[$__rate_interval]))", "retries", "B"),
    ], bars=True), 8, 8)
    lay.add(table("Assets: since last success and last run", [
        target(f"time() - secscan_pipeline_last_success_timestamp_seconds{{{WS}}}", "", "A", instant=True,
               table=True),
        target(f"secscan_pipeline_last_run_success{{{WS}}}", "", "B", instant=True, table=True),
        target(f"secscan_pipeline_last_run_duration_seconds{{{WS}}}", "", "C", instant=True, table=True),
    ], unit="s"), 8, 8)
    # Every followed workspace, also one that has never synced (it has pipeline health, not a plan yet), and
    # every workspace with a backfilled past (project scores): the same label, so one pick shows both.
    variables = [datasource_var(), query_var(
        "workspace", "Workspace",
        'label_values({__name__=~"secscan_pipeline_last_run_success|secscan_project_score"}, workspace)',
        multi=True, include_all=True), team_var()]
    links = [{"title": "Project drill-down", "type": "link", "url": "/d/scanwatch-project", "icon": "dashboard",
              "includeVars": True, "keepTime": True}]
    return dashboard("scanwatch-overview", "scanwatch: overview",
                     "Security posture, issue flow, quotas and sync health of every followed workspace.",
                     variables, lay, links)


# A series as Grafana renders a query_result answer: `{project="Shop",project_id="p1"} 80 1700000000`. Each
# label is found wherever it stands (lookaheads), so the variable does not depend on Prometheus's label order;
# a label starts after `{` or `,`, and a value may hold escaped quotes.
PROJECT_REGEX = ('/^(?=.*[{,]\\s*project="(?<text>(?:[^"\\\\]|\\\\.)*)")'
                 '(?=.*[{,]\\s*project_id="(?<value>(?:[^"\\\\]|\\\\.)*)")/')


def project() -> dict:
    lay = Layout()
    sel = f"{WT},{PID}"
    lay.row("Project")
    lay.add(stat("Score", f"secscan_project_score{{{sel}}}", unit="none",
                 thresholds=[{"color": "red", "value": None}, {"color": "orange", "value": 50},
                             {"color": "green", "value": 80}]), 4, 4)
    lay.add(panel("stat", "Grade", [target(f"secscan_project_grade_info{{{sel}}}", "{{grade}}", instant=True)],
                  options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                           "textMode": "name", "colorMode": "none", "graphMode": "none"}), 4, 4)
    lay.add(stat("Open critical", f'sum(secscan_issues_open{{{sel},severity="critical"}})', thresholds=RED_AT_1),
            4, 4)
    lay.add(stat("SLA breached", f"sum(secscan_issues_sla_breached{{{sel}}})", thresholds=RED_AT_1), 4, 4)
    lay.add(stat("SLA due soon", f"sum(secscan_issues_sla_due_soon{{{sel}}})"), 4, 4)
    lay.add(stat("Paused", f"secscan_project_paused{{{sel}}}",
                 mappings=[{"type": "value", "options": {"0": {"text": "active"}, "1": {"text": "paused",
                                                                                        "color": "orange"}}}]), 2, 4)
    lay.add(panel("stat", "Team", [target(f"secscan_project_score{{{sel}}}", "{{team}}", instant=True)],
                  description="The project's owner in the ownership map (docs/ownership.md).",
                  options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                           "textMode": "name", "colorMode": "none", "graphMode": "none"}), 2, 4)
    lay.add(series("Scores over time", [
        target(f"secscan_project_score{{{sel}}}", "project", "A"),
        target(f"secscan_target_score{{{sel}}}", "{{address}} ({{kind}})", "B"),
    ], unit="none"), 12, 8)
    lay.add(series("Open issues by severity", [target(f"sum by (severity) (secscan_issues_open{{{sel}}})",
                                                      "{{severity}}")], stack=True, overrides=SEVERITY_COLORS),
            12, 8)
    lay.add(series("New against fixed", [
        target(f"sum by (severity) (increase(secscan_issues_opened_total{{{sel}}}[$__rate_interval]))",
               "new {{severity}}", "A"),
        target(f"-sum by (severity) (increase(secscan_issues_fixed_total{{{sel}}}[$__rate_interval]))",
               "fixed {{severity}}", "B"),
    ], bars=True, stack=True), 12, 8)
    lay.add(series("Time to fix (median, 90th percentile)", [
        target(f"histogram_quantile(0.5, sum by (severity, le) (secscan_issue_time_to_fix_seconds_bucket{{{sel}}}))",
               "p50 {{severity}}", "A"),
        target(f"histogram_quantile(0.9, sum by (severity, le) (secscan_issue_time_to_fix_seconds_bucket{{{sel}}}))",
               "p90 {{severity}}", "B"),
    ], unit="s"), 12, 8)
    lay.add(table("Targets", [
        target(f"secscan_target_score{{{sel}}}", "", "A", instant=True, table=True),
        target(f"secscan_target_coverage_ratio{{{sel}}}", "", "B", instant=True, table=True),
        target(f"secscan_target_hidden_issues{{{sel}}}", "", "C", instant=True, table=True),
        target(f"secscan_target_verified{{{sel}}}", "", "D", instant=True, table=True),
        target(f"secscan_target_last_scan_failed{{{sel}}}", "", "E", instant=True, table=True),
    ]), 24, 7)
    lay.add(table("SLA by severity", [
        target(f"secscan_issues_sla_breached{{{sel}}}", "", "A", instant=True, table=True),
        target(f"secscan_issues_sla_due_soon{{{sel}}}", "", "B", instant=True, table=True),
        target(f"secscan_issues_oldest_open_age_seconds{{{sel}}}", "", "C", instant=True, table=True),
    ]), 12, 7)
    lay.add(bargauge("Open issues by family", f"secscan_issues_open_by_family{{{sel}}} > 0", "{{family}}"), 6, 7)
    lay.add(bargauge("Issues by status", f"sum by (status) (secscan_issues_by_status{{{sel}}})", "{{status}}"), 6, 7)
    lay.add(table("Mean time to fix by severity", [
        target(f"sum by (severity) (secscan_issue_time_to_fix_seconds_sum{{{sel}}})"
               f" / (sum by (severity) (secscan_issue_time_to_fix_seconds_count{{{sel}}}) > 0)", "", "A",
               instant=True, table=True)], unit="s"), 8, 7)
    lay.add(series("Scans finished by kind and status", [
        target(f"sum by (kind, status) (increase(secscan_scans_total{{{sel}}}[$__rate_interval]))",
               "{{kind}} {{status}}", "A")], bars=True, stack=True), 8, 7)
    lay.add(stat("Scans pending", f"sum(secscan_scans_pending{{{sel}}})"), 8, 7)
    lay.add(table("Open critical issues (opt-in series)", [
        target(f"secscan_critical_issue_info{{{sel}}}", "", "A", instant=True, table=True)],
        description="Needs `scanwatch exporter --critical-issue-info N`; identifiers only, never issue content."),
        24, 7)
    variables = [
        datasource_var(),
        query_var("workspace", "Workspace", "label_values(secscan_plan_info, workspace)", multi=False,
                  include_all=False),
        team_var(),
        query_var("project_id", "Project",
                  f"query_result(max by (project_id, project) (secscan_project_score{{{WT}}}))", multi=False,
                  include_all=False, regex=PROJECT_REGEX),
    ]
    links = [{"title": "Overview", "type": "link", "url": "/d/scanwatch-overview", "icon": "dashboard",
              "includeVars": True, "keepTime": True}]
    return dashboard("scanwatch-project", "scanwatch: project drill-down",
                     "One project: scores of its targets, issues by severity, family and status, SLA, time to fix "
                     "and scans.", variables, lay, links)


# Grafana's templates cannot query Prometheus, so its alert instances carry the details as labels. The
# commit is cut from the location (label_replace) because it moves at every scan of a repository and a new
# label set would be a new alert; the dashboard panel shows the current commit.
# The history dashboard: Grafana's built-in PostgreSQL data source on a PostgreSQL history, provisioned as
# provisioning/datasources/scanwatch-history.yml. Each panel's SQL is one file of sql/grafana/ reading the views
# layer, the rules the cookbook and /metrics read.
PG_DS = {"type": "grafana-postgresql-datasource", "uid": "${datasource}"}
HISTORY_SQL = HERE.parent / "sql" / "grafana"


def history_sql(name: str) -> str:
    return (HISTORY_SQL / f"{name}.sql").read_text().strip() + "\n"


def sql_target(name: str, ref: str = "A") -> dict:
    return {"datasource": PG_DS, "refId": ref, "rawSql": history_sql(name), "format": "table", "rawQuery": True,
            "editorMode": "code"}


def sql_table(title: str, name: str, *, description: str, overrides: list | None = None) -> dict:
    return panel("table", title, [sql_target(name)], description=description, datasource=PG_DS,
                 options={"showHeader": True, "cellHeight": "sm"}, overrides=overrides)


def sql_count(title: str, name: str, *, description: str, thresholds: list | None = None) -> dict:
    """A stat counting the rows of a table panel's query: one query, one home for its rule."""
    opts = {"reduceOptions": {"calcs": ["count"], "fields": "/^issue_id$/", "values": False}, "colorMode": "value",
            "graphMode": "none", "textMode": "value"}
    return panel("stat", title, [sql_target(name)], description=description, datasource=PG_DS, options=opts,
                 thresholds=thresholds)


def _unit(column: str, unit: str) -> dict:
    return {"matcher": {"id": "byName", "options": column}, "properties": [{"id": "unit", "value": unit}]}


def history() -> dict:
    lay = Layout()
    def sql_var(name: str, label: str, sql: str) -> dict:
        return {"name": name, "label": label, "type": "query", "datasource": PG_DS, "query": history_sql(sql),
                "definition": history_sql(sql), "refresh": 1, "regex": "", "sort": 1, "multi": True,
                "includeAll": True, "current": {}, "hide": 0, "options": []}

    workspace = sql_var("workspace", "Workspace", "workspaces")
    team = sql_var("team", "Team", "teams")  # each project's team now, in the chosen workspaces
    lay.row("Now")
    lay.add(sql_count("Open critical", "open_critical", thresholds=RED_AT_1,
                      description="Critical issues open and visible now (open_issues_now)."), 8, 4)
    lay.add(sql_count("SLA breached", "sla_breaches", thresholds=RED_AT_1,
                      description="Open issues older than their severity's SLA (issue_sla, policy sla_policy)."), 8, 4)
    lay.add(sql_count("Reopened in range", "regressions",
                      thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}],
                      description="Issues that came back after a fix within the time range (reopenings)."), 8, 4)
    lay.add(sql_table("Open critical issues", "open_critical", description=(
        "Every open critical issue with its title, address and location: text a Prometheus label must not "
        "carry, read here from the history itself."), overrides=[_unit("first_seen", "dateTimeAsIso")]), 24, 8)
    lay.add(sql_table("SLA breaches", "sla_breaches", description=(
        "Open issues past their SLA now, most overdue first; the same rule as secscan_issues_sla_breached and "
        "the cookbook's sla_breaches."), overrides=[_unit("overdue", "s"), _unit("first_seen", "dateTimeAsIso")]),
        24, 8)
    lay.row("Over the time range")
    lay.add(sql_table("Time to fix by project", "time_to_fix_by_project", description=(
        "Issues fixed within the time range, per project: how many, and the mean, median and p90 time from "
        "first seen to fixed (the fix_times sample /metrics counts)."),
        overrides=[_unit(c, "s") for c in ("mean", "p50", "p90")]), 12, 8)
    lay.add(sql_table("Regressions", "regressions", description=(
        "Issues that came back after a fix within the time range, how often, and where they stand now."),
        overrides=[_unit("last_reopened", "dateTimeAsIso")]), 12, 8)
    dash = dashboard("scanwatch-history", "scanwatch: history (PostgreSQL)",
                     "What the PostgreSQL history holds beyond the metrics: each open critical issue's text, SLA "
                     "breaches, time to fix per project and regressions.",
                     [datasource_var("grafana-postgresql-datasource"), workspace, team], lay,
                     [{"title": "Overview", "type": "link", "url": "/d/scanwatch-overview", "icon": "dashboard",
                       "includeVars": True, "keepTime": True}])
    dash["time"] = {"from": "now-30d", "to": "now"}
    return dash


GRAFANA_NEW_CRITICAL = (
    'max by (workspace, team, project_id, project, issue_id, address, title, family, control_id, location, first_seen, '
    'change, from_severity, detected_at) (label_replace(secscan_critical_issue_new, "location", "$1", "location", '
    '"(.*)@[^@]*"))'
)
WHAT = ('{{ if eq $labels.change "new" }}new critical issue{{ else if eq $labels.change "reopened" }}reopened after '
        'a fix{{ else if eq $labels.change "raised" }}raised to critical from {{ $labels.from_severity }}{{ else }}'
        'open again: its false-positive or accepted-risk mark was withdrawn{{ end }}')


IN_TEAM = "{{ with $labels.team }}, team {{ . }}{{ end }}"  # nothing without the label, as the Prometheus rule
ALERTMANAGER_TEMPLATES = HERE.parent / "prometheus" / "templates" / "secscan.tmpl"


def _slack_escape() -> str:
    """Slack's escaping as the Alertmanager templates define it: one rule for both alerting paths."""
    text = ALERTMANAGER_TEMPLATES.read_text(encoding="utf-8")
    start = text.index('{{ define "secscan.slack.escape" }}')
    return text[start:text.index("{{ end }}", start) + len("{{ end }}")]


def grafana_slack_template() -> str:
    """Notification templates for a Grafana Slack contact point (title `{{ template "scanwatch.slack.title" . }}`,
    text `{{ template "scanwatch.slack.text" . }}`): Grafana's defaults place labels and annotations raw, and
    Slack would turn a title or file name such as `<!channel>` into a mention. Every value is escaped (the
    exporter already made it one line and capped it), and a post lists at most 10 issues."""
    esc = 'template "secscan.slack.escape"'
    return "\n".join([
        _slack_escape(),
        '{{ define "scanwatch.slack.title" }}{{ len .Alerts.Firing }} new critical issue'
        '{{ if gt (len .Alerts.Firing) 1 }}s{{ end }}{{ with .CommonLabels.workspace }} in {{ ' + esc + ' . }}'
        '{{ end }}{{ end }}',
        '{{ define "scanwatch.slack.text" }}{{ range $i, $a := .Alerts.Firing }}{{ if lt $i 10 }}'
        '• *{{ ' + esc + ' .Labels.title }}* ({{ ' + esc + ' .Annotations.what }})\n'
        '    {{ ' + esc + ' .Labels.project }} / {{ ' + esc + ' .Labels.address }} · '
        '`{{ ' + esc + ' .Labels.location }}` · {{ ' + esc + ' .Labels.family }}/{{ ' + esc + ' .Labels.control_id }}'
        ' · first seen {{ ' + esc + ' .Labels.first_seen }} · issue `{{ ' + esc + ' .Labels.issue_id }}`\n'
        '{{ end }}{{ end }}{{ if gt (len .Alerts.Firing) 10 }}_{{ len .Alerts.Firing }} firing in all; the first 10 '
        'are listed_\n{{ end }}{{ with (index .Alerts 0).Annotations.runbook }}_What to do:_ {{ ' + esc + ' . }}'
        '{{ end }}{{ end }}',
        "",
    ])


def grafana_alert_rules() -> dict:
    """SecscanNewCriticalIssue as Grafana-managed alerting: one instance per issue, the same fields as the
    Prometheus rule's notification (labels and runbook copied from it)."""
    rule = next(r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]
                if r.get("alert") == "SecscanNewCriticalIssue")
    return {
        "apiVersion": 1,
        "groups": [{
            "orgId": 1, "name": "scanwatch", "folder": "scanwatch", "interval": "1m",
            "rules": [{
                "uid": "secscan-new-critical-issue",
                "title": "SecscanNewCriticalIssue",
                "condition": "C",
                "data": [
                    {"refId": "A", "relativeTimeRange": {"from": 600, "to": 0}, "datasourceUid": DATASOURCE_UID,
                     "model": {"refId": "A", "expr": GRAFANA_NEW_CRITICAL, "instant": True, "range": False,
                               "datasource": {"type": "prometheus", "uid": DATASOURCE_UID}}},
                    {"refId": "B", "datasourceUid": "__expr__",
                     "model": {"refId": "B", "type": "reduce", "expression": "A", "reducer": "last",
                               "datasource": {"type": "__expr__", "uid": "__expr__"}}},
                    {"refId": "C", "datasourceUid": "__expr__",
                     "model": {"refId": "C", "type": "threshold", "expression": "B",
                               "conditions": [{"evaluator": {"type": "gt", "params": [0]}}],
                               "datasource": {"type": "__expr__", "uid": "__expr__"}}},
                ],
                "noDataState": "OK",
                "execErrState": "Error",
                "for": "0s",
                "labels": dict(rule["labels"]),
                "annotations": {
                    "summary": "Critical issue in {{ $labels.project }} ({{ $labels.workspace }}" + IN_TEAM
                               + "): {{ $labels.title }}",
                    "description": (
                        "{{ $labels.title }} ({{ $labels.family }}/{{ $labels.control_id }}) at {{ $labels.address }}"
                        "{{ with $labels.location }}, {{ . }}{{ end }}; project {{ $labels.project }}, workspace "
                        "{{ $labels.workspace }}" + IN_TEAM + "; first seen {{ $labels.first_seen }}; " + WHAT
                        + ", detected {{ $labels.detected_at }}; issue {{ $labels.issue_id }}."),
                    "what": WHAT,
                    "runbook": rule["annotations"]["runbook"].strip(),
                    "__dashboardUid__": "scanwatch-overview",
                },
                "isPaused": False,
            }],
        }],
        "templates": [{"orgId": 1, "name": "scanwatch", "template": grafana_slack_template()}],
    }


class _Readable(yaml.SafeDumper):
    """Multi-line text (the notification templates) as a YAML literal block, as someone would write it."""


_Readable.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def outputs() -> dict[Path, str]:
    header = "# Generated by grafana/generate.py from prometheus/rules/secscan-alerts.yml; do not edit by hand.\n"
    return {
        HERE / "dashboards" / "scanwatch-overview.json": json.dumps(overview(), indent=2) + "\n",
        HERE / "dashboards" / "scanwatch-project.json": json.dumps(project(), indent=2) + "\n",
        HERE / "dashboards" / "scanwatch-history.json": json.dumps(history(), indent=2) + "\n",
        HERE / "provisioning" / "alerting" / "scanwatch-alerts.yml":
            header + yaml.dump(grafana_alert_rules(), Dumper=_Readable, sort_keys=False, width=120, allow_unicode=True),
    }


def main(argv: list[str]) -> int:
    stale = []
    for path, text in outputs().items():
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(HERE.parent)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if stale:
        print("out of date (run python grafana/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
