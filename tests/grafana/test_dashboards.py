"""Dashboard and provisioning structure, and every query pulled out and checked against the exposition.

A real Prometheus evaluates all of these queries in tests/e2e; here they are checked statically.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.grafana.queries import (
    GRAFANA_ALERTS,
    METRIC,
    ROOT,
    alert_queries,
    dashboard_queries,
    load_dashboards,
    panels,
    substitute,
    variable_to_api,
)
from tests.helpers import build_registry, write_snapshot

GRAFANA = ROOT / "grafana"
HISTORY_SOURCE = {"type": "grafana-postgresql-datasource", "uid": "${datasource}"}
PLUGIN = {"scanwatch-history": "grafana-postgresql-datasource", "scanwatch-overview": "prometheus",
          "scanwatch-project": "prometheus"}


def test_committed_files_match_the_generator():
    result = subprocess.run([sys.executable, str(GRAFANA / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_three_dashboards_with_stable_uids_and_variables():
    dashboards = load_dashboards()
    assert set(dashboards) == {"scanwatch-overview", "scanwatch-project", "scanwatch-history"}
    for uid, dash in dashboards.items():
        names = [v["name"] for v in dash["templating"]["list"]]
        assert names[:2] == ["datasource", "workspace"], uid
        assert dash["templating"]["list"][0]["type"] == "datasource"
        assert dash["templating"]["list"][0]["query"] == PLUGIN[uid]
    project_vars = {v["name"]: v for v in dashboards["scanwatch-project"]["templating"]["list"]}
    assert "project_id" in project_vars and "(?<value>" in project_vars["project_id"]["regex"]


def test_panels_have_unique_ids_fit_the_grid_and_do_not_overlap():
    for uid, dash in load_dashboards().items():
        ps = panels(dash)
        ids = [p["id"] for p in ps]
        assert len(ids) == len(set(ids)), uid
        cells = set()
        for p in ps:
            g = p["gridPos"]
            assert g["x"] >= 0 and g["x"] + g["w"] <= 24, (uid, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    assert (x, y) not in cells, (uid, p["title"])
                    cells.add((x, y))


def test_every_panel_queries_through_the_datasource_variable():
    for uid, dash in load_dashboards().items():
        for p in panels(dash):
            if p["type"] == "row":
                continue
            assert p["targets"], (uid, p["title"])
            refs = [t["refId"] for t in p["targets"]]
            assert len(refs) == len(set(refs)), (uid, p["title"])
            if uid == "scanwatch-history":
                assert p["datasource"] == HISTORY_SOURCE, p["title"]
                for t in p["targets"]:
                    assert t["rawSql"].strip() and t["datasource"] == HISTORY_SOURCE and t["format"] == "table"
                continue
            assert p["datasource"]["uid"] == "${datasource}", (uid, p["title"])
            for t in p["targets"]:
                assert t["expr"].strip() and t["datasource"]["uid"] == "${datasource}"


def test_overview_covers_what_the_issue_asks():
    titles = " | ".join(p["title"] for p in panels(load_dashboards()["scanwatch-overview"])).lower()
    for wanted in ("project scores", "open issues by severity", "new against fixed", "quota used",
                   "quota period ends", "since last successful sync", "429"):
        assert wanted in titles, wanted


def test_queries_filter_by_their_variables():
    for q in dashboard_queries():
        if q.kind != "panel" or "secscan_snapshot" in q.expr:
            continue
        assert "$workspace" in q.expr, (q.source, q.title)
        if q.source == "scanwatch-project":
            assert "$project_id" in q.expr, q.title


def team_series() -> set[str]:
    """The series that carry `team`: every project- and issue-level family (docs/ownership.md), and each
    recording rule whose `by` keeps it."""
    from pipelines.snapshot.catalogue import SERIES

    names = {n for s in SERIES if "project_id" in s.labels for n in s.exposed}
    return names | {q.title for q in alert_queries() if q.kind == "record" and re.search(r"by \([^)]*\bteam\b", q.expr)}


def test_panels_about_projects_and_issues_follow_the_team_variable():
    """Every dashboard on Prometheus has a multi-value `team` variable with All, and every panel reading a
    series that carries `team` filters by it. Mutation that fails it: dropping `team=~"$team"` from a panel."""
    dashboards = load_dashboards()
    for uid in ("scanwatch-overview", "scanwatch-project"):
        (team,) = [v for v in dashboards[uid]["templating"]["list"] if v["name"] == "team"]
        assert team["multi"] and team["includeAll"] and team["allValue"] == ".*", uid
    with_team = team_series()
    assert {"secscan_project_score", "secscan_critical_issue_new", "secscan:issues_open:sum"} <= with_team
    followed = 0
    for q in dashboard_queries():
        if q.kind == "panel" and set(METRIC.findall(q.expr)) & with_team:
            assert 'team=~"$team"' in q.expr, (q.source, q.title, q.expr)
            followed += 1
    assert followed > 20


def test_every_query_reads_series_the_exporter_or_rules_provide(snapshot_with_arrival, tmp_path):
    path = tmp_path / "m.json"
    write_snapshot(snapshot_with_arrival, path)
    text = generate_latest(build_registry(path, critical_info_limit=5)).decode()
    exported = {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    recorded = {q.title for q in alert_queries() if q.kind == "record"}
    queries = dashboard_queries() + alert_queries()
    assert len(queries) > 60
    for q in queries:
        names = METRIC.findall(q.expr)
        assert names or q.expr.startswith("up"), (q.source, q.title)
        for name in names:
            assert name in exported or name in recorded, (q.source, q.title, name)


def test_substitution_leaves_no_grafana_variable():
    for q in dashboard_queries():
        out = substitute(q.expr, project_id="p1")
        assert "$" not in out, (q.title, out)
        if q.kind == "variable":
            variable_to_api(out)


def test_the_history_data_source_takes_its_password_from_the_environment():
    text = (GRAFANA / "provisioning" / "datasources" / "scanwatch-history.yml").read_text()
    (source,) = yaml.safe_load(text)["datasources"]
    assert (source["type"], source["uid"]) == (HISTORY_SOURCE["type"], "scanwatch-history")
    assert source["secureJsonData"] == {"password": "$SCANWATCH_GRAFANA_DB_PASSWORD"}
    assert "password" not in source and "password" not in source["jsonData"]
    assert source["jsonData"]["database"] and source["user"] and not source["isDefault"]


def test_provisioning_files():
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "scanwatch.yml").read_text())
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus" and source["uid"] == "scanwatch-prometheus"
    # Not Grafana's default data source: provisioning scanwatch must not change what every other dashboard
    # and Explore query by default.
    assert source["isDefault"] is False
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "scanwatch.yml").read_text())
    assert provider["providers"][0]["type"] == "file" and provider["providers"][0]["options"]["path"]
    alerts = yaml.safe_load(GRAFANA_ALERTS.read_text())
    (rule,) = alerts["groups"][0]["rules"]
    assert rule["title"] == "SecscanNewCriticalIssue" and rule["condition"] == "C"
    assert {d["refId"] for d in rule["data"]} == {"A", "B", "C"}
    query = next(d for d in rule["data"] if d["refId"] == "A")
    assert query["datasourceUid"] == source["uid"]
    prom_rule = next(r for g in yaml.safe_load((ROOT / "prometheus" / "rules" / "secscan-alerts.yml").read_text())
                     ["groups"] for r in g["rules"] if r.get("alert") == "SecscanNewCriticalIssue")
    # One instance per issue from the same series, same labels and runbook as the Prometheus rule; what the
    # Prometheus rule reads back with `query` travels as instance labels (Grafana templates cannot query).
    assert "secscan_critical_issue_new" in query["model"]["expr"] and "increase(" not in query["model"]["expr"]
    assert rule["labels"] == prom_rule["labels"]
    assert rule["annotations"]["runbook"] == prom_rule["annotations"]["runbook"].strip()
    assert {"summary", "description", "runbook", "what"} <= set(rule["annotations"])
    for field in ("project", "workspace", "address", "title", "family", "control_id", "location", "first_seen",
                  "detected_at", "issue_id"):
        assert f"$labels.{field}" in rule["annotations"]["description"], field
        assert field in query["model"]["expr"], field


def _placeholders(node) -> set[str]:
    text = json.dumps(node)
    return set(re.findall(r"\$\{(DS_[A-Z0-9_]+)\}", text))


def _datasource_refs(node, path="") -> list[tuple[str, dict]]:
    """Every `datasource` object of a dashboard, with where it stands."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource" and isinstance(value, dict):
                found.append((path, value))
            found += _datasource_refs(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _datasource_refs(value, f"{path}[{i}]")
    return found


def test_dashboards_are_importable_through_grafanas_import_screen():
    """What Grafana's importer reads (DashboardImport: `__inputs`, `__requires`; "Export for sharing
    externally" writes them): each data source input names its plugin, every `${DS_...}` in the dashboard is an
    input and every input is used, `__requires` names Grafana, the data source plugin and every panel plugin,
    `id` is null; no panel, target or variable names a data source by uid, only through the variable."""
    for uid, dash in load_dashboards().items():
        inputs = dash["__inputs"]
        assert [(i["type"], i["pluginId"]) for i in inputs] == [("datasource", PLUGIN[uid])], uid
        for i in inputs:
            assert re.fullmatch(r"DS_[A-Z0-9_]+", i["name"]) and i["label"] and i["pluginName"], i
        body = {k: v for k, v in dash.items() if k not in ("__inputs", "__requires")}
        assert _placeholders(body) == {i["name"] for i in inputs}, uid
        requires = {(r["type"], r["id"]) for r in dash["__requires"]}
        assert ("grafana", "grafana") in requires and ("datasource", PLUGIN[uid]) in requires, uid
        kinds = {p["type"] for p in panels(dash) if p["type"] != "row"}
        assert {i for t, i in requires if t == "panel"} == kinds, uid
        assert all(r["name"] and "version" in r for r in dash["__requires"]), uid
        assert dash["id"] is None and dash["uid"] == uid
        refs = _datasource_refs(body)
        assert refs, uid
        for where, ref in refs:
            assert ref == {"type": PLUGIN[uid], "uid": "${datasource}"}, (uid, where, ref)

        # As the importer does it: the chosen data source's uid written where the input stands.
        chosen = json.loads(json.dumps(body).replace("${" + inputs[0]["name"] + "}", "imported-uid"))
        (variable,) = [v for v in chosen["templating"]["list"] if v["type"] == "datasource"]
        assert variable["current"]["value"] == "imported-uid" and "${DS_" not in json.dumps(chosen)


@pytest.mark.parametrize("rendered", [
    '{project="Shop, \\"EU\\"",project_id="p-1"} 80',
    '{project_id="p-1",project="Shop, \\"EU\\""} 80',
    '{workspace="acme",project_id="p-1",instance="x",project="Shop, \\"EU\\""} 80',
])
def test_the_project_variable_does_not_depend_on_label_order(rendered):
    (variable,) = [v for v in load_dashboards()["scanwatch-project"]["templating"]["list"]
                   if v["name"] == "project_id"]
    pattern = re.compile(variable["regex"].strip("/").replace("(?<", "(?P<"))
    match = pattern.search(rendered)
    assert match, rendered
    assert match.group("value") == "p-1"
    assert match.group("text") == 'Shop, \\"EU\\"'
