"""The metric catalogue (pipelines/snapshot/catalogue.py) is the one list of series: the exporter serves exactly it, the
README's metrics table says the same names, types and labels, and every alert and recording rule, dashboard
query, Grafana alert rule and backfilled series names only metrics and labels it knows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from pipelines.snapshot.catalogue import CRITICAL_INFO_LIMIT, SERIES, Series
from tests.grafana.queries import alert_queries, dashboard_queries

ROOT = Path(__file__).resolve().parents[2]
# Labels Prometheus adds to every scraped series.
SCRAPE_LABELS = ("job", "instance")
RULE_FILES = sorted((ROOT / "prometheus" / "rules").glob("*.yml"))
README_TYPES = {"gauge": "gauge", "counter": "counter", "histogram": "histogram", "info": "gauge (info)"}
NAME = re.compile(r"\b(secscan[_:][a-zA-Z0-9_:]*)")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
SELECTOR = re.compile(r"\{([^{}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
TEMPLATE = re.compile(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)|\.Labels\.([a-zA-Z_][a-zA-Z0-9_]*)")
LABEL_VALUES = re.compile(r"label_values\((?:.*,)?\s*(\w+)\)\s*$")


def _rules() -> list[dict]:
    return [rule for path in RULE_FILES for group in yaml.safe_load(path.read_text())["groups"]
            for rule in group["rules"]]


def known_metrics() -> set[str]:
    return {name for s in SERIES for name in s.exposed} | {r["record"] for r in _rules() if "record" in r}


def known_labels() -> set[str]:
    rule_labels = {key for r in _rules() for key in (r.get("labels") or {})}
    return ({label for s in SERIES for label in s.labels} | set(SCRAPE_LABELS) | rule_labels
            | {"le", "__name__", "alertname", "alertstate"})


def unknown_names(text: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a query or template uses that the catalogue lacks."""
    metrics = set(NAME.findall(text)) - known_metrics()
    labels = {label.strip() for group in GROUPING.findall(text) for label in group.split(",") if label.strip()}
    for selector in SELECTOR.findall(text):
        if not selector.lstrip().startswith("{"):  # a Go template's braces hold no matchers
            labels |= set(MATCHER.findall(selector))
    labels |= {a or b for a, b in TEMPLATE.findall(text)}
    match = LABEL_VALUES.search(text)
    if match:
        labels.add(match.group(1))
    return metrics, labels - known_labels()


@pytest.fixture
def snap_path(tmp_path: Path) -> Path:
    """The exporter tests' history with a page-worthy arrival, one part per workspace: every family of the
    catalogue has a sample."""
    from pipelines.snapshot.format import encode_snapshot
    from pipelines.snapshot.store import FileStore
    from pipelines.sync.snapshot import build_parts
    from tests.exporter.history import NOW, add_critical_arrival, fresh_db, load_history

    conn = fresh_db()
    load_history(conn)
    add_critical_arrival(conn)
    path = tmp_path / "scanwatch-metrics.json"
    FileStore(path).replace_all({n: encode_snapshot(d) for n, d in build_parts(conn, now=NOW).items()})
    conn.close()
    return path


def test_the_checker_catches_a_wrong_metric_and_a_wrong_label() -> None:
    assert unknown_names('sum by (wrkspace) (secscan_isues_open{severty="high"})') == (
        {"secscan_isues_open"}, {"wrkspace", "severty"})
    assert unknown_names('{{ $labels.projet }}') == (set(), {"projet"})
    assert unknown_names("sum by (workspace, severity) (secscan_issues_open)") == (set(), set())


def test_the_exporter_serves_the_catalogue_and_only_it(snap_path: Path) -> None:
    from prometheus_client import generate_latest

    from tests.helpers import build_registry

    text = generate_latest(build_registry(snap_path, critical_info_limit=CRITICAL_INFO_LIMIT)).decode()
    served = {f.name: f for f in text_string_to_metric_families(text) if f.name.startswith("secscan_")}
    # The text format names an info family by its `_info` samples and calls it a gauge.
    by_name = {s.exposed[0] if s.type == "info" else s.name: s for s in SERIES}
    assert set(served) == set(by_name), (set(served) ^ set(by_name))
    for name, family in served.items():
        series: Series = by_name[name]
        assert family.type == ("gauge" if series.type == "info" else series.type), name
        assert family.documentation == series.help, name
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            assert set(sample.labels) - {"le"} == set(series.labels), (name, sample.labels)


def _readme_rows() -> dict[str, tuple[str, set[str]]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Metrics"):text.index("### Alerts")]
    abbreviations = {}
    for name, labels in re.findall(r"`(\w)` = (`[^`]*`(?: \+ `[^`]*`)?)", section):
        abbreviations[name] = labels
    project = {"workspace", "team", "project_id", "project"}
    expand = {"P": project, "T": project | {"target_id", "address", "kind"}}
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`secscan_"):
            continue
        labels: set[str] = set()
        for part in (p.strip() for p in cells[2].split(",")):
            if part in expand:
                labels |= expand[part]
            elif part:
                labels |= {label.strip(" `") for label in part.split(",") if label.strip(" `")}
        rows[cells[0].strip("`")] = (cells[1], labels)
    return rows


def test_the_readme_table_lists_every_series_with_its_type_and_labels() -> None:
    rows = _readme_rows()
    listed = {}
    for s in SERIES:
        name = s.name if s.type in ("gauge", "histogram") else s.exposed[0]
        listed[name] = (README_TYPES[s.type], set(s.labels))
    assert set(rows) == set(listed), set(rows) ^ set(listed)
    for name, (kind, labels) in listed.items():
        readme_kind, readme_labels = rows[name]
        assert readme_kind.split(" (1)")[0] == kind, (name, readme_kind, kind)
        assert readme_labels == labels, (name, readme_labels ^ labels)


@pytest.mark.parametrize("query", [*alert_queries(), *dashboard_queries()], ids=lambda q: f"{q.source}:{q.title}")
def test_rules_and_dashboards_name_only_what_the_catalogue_knows(query) -> None:
    assert unknown_names(query.expr) == (set(), set()), query.expr


def test_alert_annotations_and_labels_name_only_known_labels() -> None:
    for rule in _rules():
        for text in [*(rule.get("annotations") or {}).values(), *(rule.get("labels") or {}).values()]:
            metrics, labels = unknown_names(str(text))
            assert (metrics, labels) == (set(), set()), (rule.get("alert") or rule.get("record"), text)


def test_backfilled_series_name_only_catalogue_metrics_and_labels(tmp_path: Path) -> None:
    from datetime import timedelta

    from pipelines.backfill import tsdb
    from pipelines.backfill.openmetrics import FAMILIES, rule_pasts
    from tests.backfill.handmade import at, history

    conn = history(tmp_path / "h.duckdb", projects=["p"], targets=[("t1", "p")],
                   scans=[("s1", "t1", at(-20), 70, "done"), ("s2", "t1", at(-5), 80, "done")],
                   issues=[("i1", "p", "high", "open", at(-30), None),
                           ("i2", "p", "critical", "fixed", at(-25), at(-9))])
    try:
        outcome = tsdb.write_series(conn, tsdb.Plan(tmp_path, step=timedelta(days=1),
                                                    labels={"job": "scanwatch", "instance": "x:9817"}),
                                    tmp_path / "series.om")
    finally:
        conn.close()
    assert outcome.samples > 0
    text = (tmp_path / "series.om").read_text()
    families = list(text_string_to_metric_families(text.replace("# EOF\n", "")))
    assert families and {f.name for f in families} <= known_metrics()
    pasts = rule_pasts()
    for family in families:
        want = set(pasts[family.name].labels) if family.name in pasts else {*FAMILIES[family.name], *SCRAPE_LABELS}
        for sample in family.samples:
            assert set(sample.labels) == want, (family.name, sample.labels)
