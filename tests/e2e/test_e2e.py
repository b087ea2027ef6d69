"""End to end: simulator -> `scanwatch sync` -> snapshot -> exporter -> Prometheus -> Alertmanager -> webhook.

Everything runs as it would in production (the sync and the exporter as `scanwatch` subprocesses, the
Debian Prometheus and Alertmanager binaries with the shipped rule files); only intervals are shortened.
Proves that every dashboard and rule expression evaluates on real data, that a first deployment does not
page, and that a critical issue appearing in the world reaches the webhook as SecscanNewCriticalIssue.
"""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request

import pytest

from tests.e2e.stack import LiveStack, WebhookReceiver, get_json, poll, running_stack
from tests.grafana.queries import (
    METRIC,
    alert_queries,
    dashboard_queries,
    substitute,
    variable_to_api,
    variable_values,
)
from tests.prometheus.tools import require

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
SELECTOR = re.compile(r"\b((?:secscan[_:][a-zA-Z0-9_:]*|up)\{[^}]*\})")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    from simulator.testing import SimConfig, serve_simulator

    with serve_simulator(SimConfig(seed=7, scan_failure_rate=0.2)) as sim:
        sim.run_round()
        sim.advance(120)  # scans finish, issues appear
        live = LiveStack(tmp_path_factory.mktemp("e2e"), sim, WebhookReceiver())
        with running_stack(live, shipped_routes=False, exporter_args=("--critical-issue-info", "20")) as st:
            # Several scrapes, so that rates have samples.
            poll("a few scrapes", lambda: st.query('count_over_time(secscan_snapshot_readable[1m]) >= 4'),
                 timeout=30)
            yield st


def busiest_project(snapshot: dict) -> str:
    rows = snapshot["tables"]["issue_severity"]
    return max({r["project_id"] for r in rows}, key=lambda p: sum(r["open"] for r in rows if r["project_id"] == p))


def test_exporter_serves_the_synced_history(stack):
    snap = stack.snapshot()
    open_total = sum(r["open"] for r in snap["tables"]["issue_severity"])
    assert open_total > 0
    (result,) = stack.query("sum(secscan_issues_open)")
    assert float(result["value"][1]) == open_total
    (readable,) = stack.query("secscan_snapshot_readable")
    assert readable["value"][1] == "1"
    assert stack.query('secscan_sync_last_success_timestamp_seconds{workspace!=""}')
    # promtool's linter accepts the exposition of real data (names, help, types, label values)
    with urllib.request.urlopen(stack.exporter_url, timeout=10) as resp:
        exposition = resp.read()
    lint = subprocess.run([require("promtool"), "check", "metrics"], input=exposition, capture_output=True)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr
    # The age is the wall-clock time since the sync built the snapshot, in seconds, at each scrape: the
    # stamp plus the age is the scrape's moment (at most a scrape interval before the query), and it grows a
    # second per second. Mutation that fails it (and passed the former `0 <= age < 600`): the exporter
    # reporting the age in minutes.
    (generated,) = stack.query("secscan_snapshot_generated_timestamp_seconds")
    (age,) = stack.query("secscan_snapshot_age_seconds")
    asked, first = float(age["value"][0]), float(age["value"][1])
    assert 0 <= asked - (float(generated["value"][1]) + first) < 3, (asked, generated, age)
    grown = poll("the age to grow by 3 s", lambda: [a for a in stack.query("secscan_snapshot_age_seconds")
                                                    if float(a["value"][1]) >= first + 3], timeout=20)
    (later,) = grown
    assert abs((float(later["value"][1]) - first) - (float(later["value"][0]) - asked)) < 2.5, (age, later)


def test_every_dashboard_and_rule_expression_evaluates_with_data(stack):
    snap = stack.snapshot()
    project_id = busiest_project(snap)
    # Series the simulated world has no data for, so a query reading only them may be empty.
    # A first deployment pages on nothing: no critical issue has arrived since it, by definition.
    absent_ok = {"secscan_critical_issue_new"}
    if all(w["trial_ends_at"] is None for w in snap["tables"]["workspaces"]):
        absent_ok.add("secscan_api_trial_end_timestamp_seconds")
    no_fix_yet = all(r["count"] == 0 for r in snap["tables"]["time_to_fix"] if r["project_id"] == project_id)
    hidden_none = {
        "scanwatch-overview": all(t["hidden_issues"] is None for t in snap["tables"]["targets"]),
        "scanwatch-project": all(t["hidden_issues"] is None for t in snap["tables"]["targets"]
                                 if t["project_id"] == project_id),
    }
    empty, checked = [], 0
    for q in dashboard_queries():
        expr = substitute(q.expr, project_id=project_id)
        checked += 1
        if q.kind == "variable":
            path, params = variable_to_api(expr)
            body = get_json(stack.prom_url + path, params)
            assert body["status"] == "success", (q, body)
            data = body["data"]["result"] if "result" in body["data"] else body["data"]
            values = variable_values(data, q.regex)
            assert values, (q.source, q.title)
            if q.title == "project_id":  # the drill-down's picker yields real project ids
                assert set(values) == {r["project_id"] for r in snap["tables"]["projects"]}
            if q.title == "workspace":
                assert set(values) == {w["workspace"] for w in snap["tables"]["workspaces"]}
            if q.title == "team":  # without an ownership map: the default team alone
                assert set(values) == {p["team"] for p in snap["tables"]["projects"]} == {"unowned"}
            continue
        result = stack.query(expr) if q.instant else stack.query_range(expr)
        if not result:
            empty.append((q.source, q.title, expr))
    for q in alert_queries():
        checked += 1
        stack.query(q.expr)  # alerts are filters: they may rightly be empty; their inputs may not
        for name in set(METRIC.findall(q.expr)) - absent_ok:
            assert stack.query(f'count({{__name__="{name}"}})'), (q.title, name)
        # Each selector with label matchers selects something: a misspelt label value selects nothing and
        # would keep its alert silent for ever. Mutation that fails it (and passed the former name-only
        # check): `credit="scans"` written `credit="scan"` in SecscanQuotaNearlyExhausted's pack credits.
        for selector in SELECTOR.findall(q.expr):
            if selector.split("{", 1)[0] not in absent_ok:
                assert stack.query(f"count({selector})"), (q.title, selector)
    allowed = []
    for source, title, expr in empty:
        if any(name in absent_ok for name in METRIC.findall(expr)):
            allowed.append(title)
        elif no_fix_yet and "time_to_fix_seconds_sum" in expr and "> 0" in expr:
            allowed.append(title)  # a mean over zero fixed issues is rightly empty
        elif hidden_none.get(source) and "secscan_target_hidden_issues" in expr:
            allowed.append(title)  # only unverified sites report hidden issues
    unexpected = [e for e in empty if e[1] not in allowed]
    # Prometheus itself evaluated every shipped rule without error.
    groups = get_json(f"{stack.prom_url}/api/v1/rules")["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == len([q for q in alert_queries() if q.source != "grafana-alert"])
    assert all(r["health"] == "ok" and not r.get("lastError") for r in rules), [
        (r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    print(f"{checked} expressions evaluated; empty because the world has no such data: {sorted(set(allowed))}")
    assert not unexpected, unexpected
    assert checked > 80


def test_first_deployment_does_not_page(stack):
    # Evaluations have run over several scrapes of the first snapshot: nothing new appeared yet.
    poll("rule evaluations", lambda: stack.query("count_over_time(secscan:issues_open:sum[1m]) >= 3"))
    alerts = get_json(f"{stack.prom_url}/api/v1/alerts")["data"]["alerts"]
    assert not [a for a in alerts if a["labels"]["alertname"] == "SecscanNewCriticalIssue"]
    assert not stack.webhook.alerts("SecscanNewCriticalIssue")
    assert stack.query("secscan_issues_open{severity=\"critical\"} > 0")  # there is a backlog...
    assert not stack.query("secscan_critical_issue_new")  # ...and none of it is new


def test_new_critical_issue_fires_and_reaches_the_webhook(stack):
    sim = stack.sim
    target_id = sim.target_ids(verified=True)[0]
    issue = sim.add_issue(target_id, "critical")
    sim.advance(60)
    before = stack.query(f'secscan_issues_opened_total{{severity="critical",project_id="{issue.project_id}"}}')
    started = time.monotonic()
    stack.sync()
    after = poll("the new issue in the exporter", lambda: [
        r for r in stack.query(f'secscan_issues_opened_total{{severity="critical",project_id="{issue.project_id}"}}')
        if float(r["value"][1]) >= float(before[0]["value"][1]) + 1])
    assert after
    firing = poll("SecscanNewCriticalIssue firing in Prometheus", lambda: [
        a for a in get_json(f"{stack.prom_url}/api/v1/alerts")["data"]["alerts"]
        if a["labels"]["alertname"] == "SecscanNewCriticalIssue" and a["state"] == "firing"], timeout=30)
    assert issue.id in {a["labels"]["issue_id"] for a in firing}
    delivered = poll("the webhook receiving the alert from Alertmanager", lambda: [
        a for a in stack.webhook.alerts("SecscanNewCriticalIssue") if a["labels"]["issue_id"] == issue.id],
        timeout=30)
    alert = delivered[0]
    assert alert["labels"]["project_id"] == issue.project_id and alert["labels"]["severity"] == "page"
    assert alert["labels"]["change"] == "new"
    assert {"summary", "description", "runbook", "title", "location"} <= set(alert["annotations"])
    assert alert["annotations"]["summary"].startswith("Critical issue in ")
    # The opt-in info series names the issue (by id only) so a responder can find it.
    assert stack.query(f'secscan_critical_issue_info{{issue_id="{issue.id}"}}')
    # The sync ran while Prometheus scraped every second: no scrape failed, the snapshot stayed readable.
    window = f"{int(time.monotonic() - started) + 5}s"
    assert stack.query(f'min_over_time(up{{job="scanwatch"}}[{window}]) == 1')
    assert stack.query(f"min_over_time(secscan_snapshot_readable[{window}]) == 1")
    print(f"new critical issue delivered {time.monotonic() - started:.1f}s after the second sync started")
