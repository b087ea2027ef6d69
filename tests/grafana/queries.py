"""Every PromQL query the Grafana files hold, and Grafana's variables replaced the way Grafana would."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
GRAFANA_ALERTS = ROOT / "grafana" / "provisioning" / "alerting" / "scanwatch-alerts.yml"
RULE_FILES = sorted((ROOT / "prometheus" / "rules").glob("*.yml"))
METRIC = re.compile(r"\b(secscan[_:][a-zA-Z0-9_:]*)")


@dataclass(frozen=True)
class Query:
    source: str  # dashboard uid, "grafana-alert" or the rule file
    title: str  # panel title, variable name or rule name
    expr: str
    kind: str  # "panel", "variable", "alert", "record"
    regex: str = ""  # a variable's regex
    instant: bool = True  # how Grafana asks: instant query, or a range query over the dashboard's time


def load_dashboards() -> dict[str, dict]:
    return {json.loads(p.read_text())["uid"]: json.loads(p.read_text()) for p in DASHBOARDS}


def panels(dash: dict) -> list[dict]:
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def is_sql(datasource: dict) -> bool:
    """A query of Grafana's PostgreSQL data source (the history dashboard), not PromQL."""
    return datasource.get("type") == "grafana-postgresql-datasource"


def dashboard_queries() -> list[Query]:
    """Every PromQL query of the dashboards (panels and variables)."""
    found = []
    for uid, dash in load_dashboards().items():
        for p in panels(dash):
            for t in p.get("targets", []):
                if not is_sql(t["datasource"]):
                    found.append(Query(uid, p["title"], t["expr"], "panel", instant=not t.get("range", False)))
        for v in dash["templating"]["list"]:
            if v["type"] == "query" and not is_sql(v["datasource"]):
                found.append(Query(uid, v["name"], v["definition"], "variable", v.get("regex") or ""))
    return found


def sql_queries() -> list[Query]:
    """Every SQL query of the dashboards: panels (`kind` "panel") and variables."""
    found = []
    for uid, dash in load_dashboards().items():
        for p in panels(dash):
            for t in p.get("targets", []):
                if is_sql(t["datasource"]):
                    found.append(Query(uid, p["title"], t["rawSql"], "panel"))
        for v in dash["templating"]["list"]:
            if v["type"] == "query" and is_sql(v["datasource"]):
                found.append(Query(uid, v["name"], v["definition"], "variable"))
    return found


_MACRO = re.compile(r"\$([_a-zA-Z0-9]+)\(([^\)]*)\)")


def _rfc3339nano(moment: datetime) -> str:
    """Go's time.RFC3339Nano of a UTC instant: trailing zeros of the fraction dropped, `Z` for UTC."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{moment.microsecond:06d}".rstrip("0")
    return text + (f".{fraction}" if fraction else "") + "Z"


def expand_sql(sql: str, *, workspaces: list[str], start: datetime, end: datetime,
               teams: list[str] | None = None) -> str:
    """A panel's SQL as Grafana's PostgreSQL data source sends it: the multi-value `$workspace` and `$team` as
    lists of quoted literals (the SQL data sources' `interpolateVariable`), then the time macros as its macro
    engine writes them (pkg/tsdb/grafana-postgresql-datasource/macros.go)."""

    def quoted(values: list[str]) -> str:
        return ",".join("'" + v.replace("'", "''") + "'" for v in values)

    sql = sql.replace("$workspace", quoted(workspaces))
    if "$team" in sql:
        assert teams is not None, "the SQL reads $team: give the team variable's values"
        sql = sql.replace("$team", quoted(teams))

    def macro(m: re.Match) -> str:
        name, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        if name == "__timeFilter":
            return f"{args[0]} BETWEEN '{_rfc3339nano(start)}' AND '{_rfc3339nano(end)}'"
        if name == "__timeFrom":
            return f"'{_rfc3339nano(start)}'"
        if name == "__timeTo":
            return f"'{_rfc3339nano(end)}'"
        if name == "__time":
            return f'{args[0]} AS "time"'
        raise ValueError(f"a macro this test does not expand: ${name}")

    return _MACRO.sub(macro, sql)


def alert_queries() -> list[Query]:
    found = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                kind = "alert" if "alert" in rule else "record"
                found.append(Query(path.name, rule.get("alert") or rule["record"], rule["expr"], kind))
    for group in yaml.safe_load(GRAFANA_ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            for d in rule["data"]:
                if "expr" in d["model"]:
                    found.append(Query("grafana-alert", rule["title"], d["model"]["expr"], "alert"))
    return found


def substitute(expr: str, *, workspace: str = ".*", project_id: str = ".*", team: str = ".*",
               rate_interval: str = "1m", interval: str = "15s", range_: str = "1h") -> str:
    """Replace Grafana's variables; `=` matchers on a regex value become `=~` as an All selection does."""
    out = (expr.replace("$__rate_interval", rate_interval).replace("$__interval", interval)
           .replace("$__range", range_).replace("$workspace", workspace).replace("$project_id", project_id)
           .replace("$team", team))
    if project_id == ".*":
        out = out.replace('project_id=".*"', 'project_id=~".*"')
    return out


def variable_to_api(definition: str) -> tuple[str, dict]:
    """A variable's definition as a Prometheus HTTP API call (path, params), as Grafana issues it."""
    m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", definition.strip())
    if m:
        return f"/api/v1/label/{m.group(2)}/values", {"match[]": m.group(1)}
    m = re.fullmatch(r"query_result\((.+)\)", definition.strip())
    if m:
        return "/api/v1/query", {"query": m.group(1)}
    raise ValueError(f"unsupported variable query {definition!r}")


def variable_values(definition_result: list, regex: str) -> list[str]:
    """Values Grafana derives from a query_result answer: each series rendered as Grafana renders it
    (`name{k="v",...} value ts`), then the variable's regex applied (its `value` group when named)."""
    pattern = None
    if regex:
        pattern = re.compile(regex.strip("/").replace("(?<", "(?P<"))
    out = []
    for item in definition_result:
        if isinstance(item, str):  # label_values answers plain strings
            text = item
        else:
            labels = dict(item["metric"])
            name = labels.pop("__name__", "")
            text = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" + f" {item['value'][1]}"
        if pattern is None:
            out.append(text)
            continue
        m = pattern.search(text)
        if m:
            out.append(m.groupdict().get("value") or m.group(1) if m.groups() else m.group(0))
    return out
