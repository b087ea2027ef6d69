"""Text the service sent, on its way out of scanwatch: every label value on one line and capped, and each
receiver's own syntax escaped, checked with the real consumers (Prometheus with a label length limit,
Alertmanager's template engine and a real Alertmanager posting to Slack, e-mail and webhook receivers).

The snapshot carrying the hostile text is built from a history on each engine for the label check
(`engine_hostile_path`); what the receivers do with a snapshot is the same whichever engine built it, so the
Prometheus, Alertmanager and Slack cases read the DuckDB one."""

from __future__ import annotations

import email
import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pipelines.snapshot.labels import MAX_LABEL_CHARACTERS, label_value
from tests.e2e.stack import (
    Process,
    WebhookReceiver,
    get_json,
    http_ok,
    poll,
    write_prometheus_config,
    write_shipped_alertmanager_config,
)
from tests.exporter.history import NOW, add_critical_arrival, fresh_db, load_history
from tests.helpers import build_registry, build_snapshot, write_snapshot
from tests.prometheus.tools import ALERTMANAGER_NAMES, free_port, require

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = str(ROOT / "prometheus" / "templates" / "*.tmpl")

# What a hostile or careless service can put in the fields that become labels.
WORKSPACE = "<!everyone> Acme"  # without a workspaces file, the service's own workspace name is the label
PROJECT = "Shop\u202e\u2028evil\u0085\nline\x1b]0;x\x07"
SLACK_TITLE = "<!channel> <http://evil.example/login|Reset your password>"
LOCATION = "src/<!here>.py:7@c0ffee"
BIG_ADDRESS = "a" * 100_000  # a 100 KB site address
WIDE_ADDRESS = "\U0001f525" * 30_000  # 4 bytes a character
# Characters that must never leave scanwatch in a label: controls, bidi marks, line separators.
FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def hostile_snapshot(db: str | None = None) -> dict:
    """The known history with hostile text in every field that becomes a label, and its snapshot: in memory
    on DuckDB, or in the PostgreSQL database `db`."""
    from pipelines.storage import connect

    conn = connect(db) if db else fresh_db()
    load_history(conn)
    add_critical_arrival(conn)
    conn.execute("UPDATE accounts SET workspace_name = ? WHERE workspace_id = 'ws-1'", [WORKSPACE])
    conn.execute("UPDATE projects SET name = ? WHERE id = 'p1'", [PROJECT])
    conn.execute("UPDATE targets SET address = ? WHERE id = 't1'", [BIG_ADDRESS])
    conn.execute("UPDATE targets SET address = ? WHERE id = 't2'", [WIDE_ADDRESS])
    conn.execute("UPDATE issues SET title = ?, location = ?, address = ? WHERE id = 'i10'",
                 [SLACK_TITLE + " " + "x" * 5000, LOCATION + "y" * 5000, BIG_ADDRESS])
    try:
        return build_snapshot(conn, now=NOW, critical_info_limit=5)
    finally:
        conn.close()


@pytest.fixture
def hostile_path(tmp_path) -> Path:
    path = tmp_path / "metrics.json"
    write_snapshot(hostile_snapshot(), path)
    return path


@pytest.fixture
def engine_hostile_path(new_history, tmp_path) -> Path:
    """`hostile_path`, its snapshot built from a history on each engine (`new_history`)."""
    path = tmp_path / "metrics.json"
    write_snapshot(hostile_snapshot(new_history()), path)
    return path


def test_every_label_value_leaves_on_one_line_and_capped(engine_hostile_path):
    text = generate_latest(build_registry(engine_hostile_path, critical_info_limit=5)).decode()
    values = [(s.name, k, v) for fam in text_string_to_metric_families(text) for s in fam.samples
              for k, v in s.labels.items()]
    assert values
    for name, label, value in values:
        assert len(value) <= MAX_LABEL_CHARACTERS and len(value.encode()) <= 1024, (name, label, len(value))
        assert not FORBIDDEN.search(value), (name, label, value[:80])
        assert value == value.strip(), (name, label)
    projects = {v for _, label, v in values if label == "project"}
    assert "Shop evil line]0;x" in projects
    addresses = {v for n, label, v in values if label == "address" and n == "secscan_target_score"}
    assert "a" * 255 + "…" in addresses and "\U0001f525" * 255 + "…" in addresses


@pytest.mark.parametrize(("raw", "label", "expected"), [
    ("a\r\nb\u2029c\x0bd", "project", "a b c d"),
    ("\u200eright\u202eleft\u2066iso\u2069", "title", "rightleftiso"),
    ("  padded\t", "workspace", "padded"),
    ("z" * 300, "control_id", "z" * 127 + "…"),
    ("\ud800lone", "family", "lone"),
])
def test_label_value_cleans_and_caps_by_label(raw, label, expected):
    assert label_value(label, raw) == expected


def test_a_prometheus_with_a_label_length_limit_scrapes_every_series(hostile_path, tmp_path):
    prometheus = require("prometheus")
    exp_port, prom_port = free_port(), free_port()
    exporter = Process("exporter", [sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address",
                                    "127.0.0.1", "--port", str(exp_port), "--snapshot", str(hostile_path)], tmp_path)
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "scanwatch", "label_value_length_limit": 1024,
                            "static_configs": [{"targets": [f"127.0.0.1:{exp_port}"]}]}]}))
    prom = Process("prometheus", [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'p'}",
                                  f"--web.listen-address=127.0.0.1:{prom_port}"], tmp_path)
    url = f"http://127.0.0.1:{prom_port}/api/v1/query"
    try:
        poll("the exporter", lambda: http_ok(f"http://127.0.0.1:{exp_port}/metrics"))
        up = poll("a finished scrape", lambda: get_json(url, {"query": 'up{job="scanwatch"}'})["data"]["result"],
                  timeout=60)
        assert up[0]["value"][1] == "1", prom.tail()
        targets = poll("target series", lambda: get_json(url, {"query": "secscan_target_score"})["data"]["result"])
        assert {len(t["metric"]["address"]) for t in targets} == {256}
    finally:
        prom.stop()
        exporter.stop()


def render(template: str, data: dict, tmp_path: Path, kind: str = "text") -> str:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data))
    done = subprocess.run([require("amtool"), "template", "render", f"--template.glob={TEMPLATES}",
                           f"--template.type={kind}", f"--template.data={path}",
                           f'--template.text={{{{ template "{template}" . }}}}'], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _alert(index: int, title: str = SLACK_TITLE, location: str = LOCATION, workspace: str = "A<c>me") -> dict:
    return {"status": "firing",
            "labels": {"alertname": "SecscanNewCriticalIssue", "workspace": workspace, "issue_id": f"i{index}",
                       "detected_at": "2026-11-01T10:15:00Z", "severity": "page"},
            "annotations": {"title": title, "what": "new critical issue", "project": "Shop & <b>Co</b>",
                            "address": "acme/<shop>", "family": "code", "control_id": "code.sqli",
                            "location": location, "first_seen": "2026-11-01T10:00:00Z", "runbook": "Fix <it> & go."},
            "startsAt": "2026-11-01T10:16:00Z", "endsAt": "0001-01-01T00:00:00Z"}


def _group(alerts: list[dict], workspace: str = "A<c>me") -> dict:
    return {"receiver": "secscan-page", "status": "firing", "externalURL": "http://am", "alerts": alerts,
            "groupLabels": {"alertname": "SecscanNewCriticalIssue"},
            "commonLabels": {"alertname": "SecscanNewCriticalIssue", "workspace": workspace},
            "commonAnnotations": {}}


# Slack turns <!channel>, <!here>, <@U123> and <url|text> into mentions and disguised links; its formatting
# rules ask for &, < and > to be sent as &amp;, &lt; and &gt;. No raw < or > may remain in a Slack field.
def test_slack_fields_carry_service_text_inert(tmp_path):
    data = _group([_alert(1), _alert(2, title="Tom & Jerry", location="src/<!here>.py")])
    for template in ("secscan.slack.title", "secscan.slack.text", "secscan.slack.fallback"):
        out = render(template, data, tmp_path)
        assert "<" not in out and ">" not in out, (template, out)
    text = render("secscan.slack.text", data, tmp_path)
    assert "&lt;!channel&gt; &lt;http://evil.example/login|Reset your password&gt;" in text
    assert "`src/&lt;!here&gt;.py:7@c0ffee`" in text and "Tom &amp; Jerry" in text
    assert "Shop &amp; &lt;b&gt;Co&lt;/b&gt; / acme/&lt;shop&gt;" in text and "Fix &lt;it&gt; &amp; go." in text
    assert render("secscan.slack.title", data, tmp_path) == "2 new critical issues in A&lt;c&gt;me"


def _resolved(alert: dict) -> dict:
    return {**alert, "status": "resolved", "endsAt": "2026-11-01T11:00:00Z"}


def test_slack_fields_of_resolved_alerts_carry_service_text_inert(tmp_path):
    """A resolved message carries the same service text as a firing one: the issue titles it lists, the
    workspace in its title, another alert's summary. Mutations that fail it: the resolved line's title, or the
    resolved message's title, placed without "secscan.slack.escape"."""
    resolved = [_resolved(_alert(1)), _resolved(_alert(2, title="Tom & Jerry"))]
    data = {**_group(resolved), "status": "resolved"}
    for template in ("secscan.slack.title", "secscan.slack.text", "secscan.slack.fallback"):
        out = render(template, data, tmp_path)
        assert "<" not in out and ">" not in out, (template, out)
    text = render("secscan.slack.text", data, tmp_path)
    assert "• resolved: &lt;!channel&gt; &lt;http://evil.example/login|Reset your password&gt; (`i1`)" in text
    assert "• resolved: Tom &amp; Jerry (`i2`)" in text
    assert render("secscan.slack.title", data, tmp_path) == "Critical issues resolved in A&lt;c&gt;me"

    # Firing and resolved in one message, and an alert of another kind resolved: its summary is escaped too.
    mixed = _group([_alert(3), *resolved])
    text = render("secscan.slack.text", mixed, tmp_path)
    assert "<" not in text and ">" not in text and text.count("• resolved: ") == 2, text
    other = {"status": "resolved", "labels": {"alertname": "SecscanProjectScoreDrop", "workspace": "A<c>me",
                                             "project": "<!here>", "severity": "warning"},
             "annotations": {"summary": "Score of <!here> & co dropped by 12 points", "description": "d",
                             "runbook": "r"},
             "startsAt": "2026-11-01T10:16:00Z", "endsAt": "2026-11-01T11:00:00Z"}
    group = {"receiver": "secscan-warning", "status": "resolved", "externalURL": "http://am", "alerts": [other],
             "groupLabels": {"alertname": "SecscanProjectScoreDrop"},
             "commonLabels": {"alertname": "SecscanProjectScoreDrop", "workspace": "A<c>me"}, "commonAnnotations": {}}
    assert render("secscan.slack.title", group, tmp_path) == "[RESOLVED] SecscanProjectScoreDrop (A&lt;c&gt;me)"
    assert "• resolved: Score of &lt;!here&gt; &amp; co dropped by 12 points" in render("secscan.slack.text", group,
                                                                                          tmp_path)


def test_a_slack_post_lists_a_bounded_number_of_resolved_issues(tmp_path):
    data = {**_group([_resolved(_alert(i, title="t" * 200)) for i in range(30)]), "status": "resolved"}
    text = render("secscan.slack.text", data, tmp_path)
    assert text.count("• resolved: ") == 10 and "_30 resolved in all_" in text
    assert len(text) < 6_000


def test_a_slack_post_lists_a_bounded_number_of_issues(tmp_path):
    long_title = "t" * 200
    data = _group([_alert(i, title=long_title, location="l" * 256) for i in range(100)])
    text = render("secscan.slack.text", data, tmp_path)
    assert text.count("• ") == 10 and "100 firing in all" in text
    assert len(text) < 12_000


def test_email_html_escapes_service_text_with_alertmanagers_html_engine(tmp_path):
    html = render("secscan.email.html", _group([_alert(1)]), tmp_path, kind="html")
    assert "&lt;!channel&gt; &lt;http://evil.example/login|Reset your password&gt;" in html
    assert "<!channel>" not in html and "<!here>" not in html and "<b>Co</b>" not in html


class SmtpSink:
    """A plain SMTP server that keeps each message's raw data: what Alertmanager really sends."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        conn.sendall(b"220 sink ESMTP\r\n")
        data = None
        for raw in reader:
            line = raw.decode("utf-8", "replace")
            if data is not None:
                if line in (".\r\n", ".\n"):
                    self.messages.append("".join(data))
                    data = None
                    conn.sendall(b"250 ok\r\n")
                else:
                    data.append(line)
                continue
            verb = line[:4].upper()
            if verb == "EHLO":
                conn.sendall(b"250-sink\r\n250 8BITMIME\r\n")
            elif verb == "DATA":
                data = []
                conn.sendall(b"354 go on\r\n")
            elif verb == "QUIT":
                conn.sendall(b"221 bye\r\n")
                break
            else:
                conn.sendall(b"250 ok\r\n")
        conn.close()

    def stop(self) -> None:
        self.sock.close()


@pytest.mark.e2e
def test_a_hostile_issue_reaches_slack_email_and_webhook_inert_and_small(hostile_path, tmp_path):
    """The whole way out: exporter, a Prometheus with a label length limit evaluating the shipped rules, and
    the shipped Alertmanager configuration posting to a Slack endpoint, an SMTP server and a webhook."""
    prometheus, alertmanager = require("prometheus"), require(*ALERTMANAGER_NAMES)
    hooks, smtp = WebhookReceiver(), SmtpSink()
    exp_port, am_port, prom_port = free_port(), free_port(), free_port()
    write_shipped_alertmanager_config(tmp_path / "am.yml", hooks.url.rsplit("/", 1)[0])
    config = yaml.safe_load((tmp_path / "am.yml").read_text())
    config["global"].update(smtp_smarthost=f"127.0.0.1:{smtp.port}", smtp_require_tls=False)
    for receiver in config["receivers"]:
        if receiver["name"] == "secscan-page":
            shipped = yaml.safe_load((ROOT / "prometheus" / "alertmanager.yml").read_text())
            receiver["email_configs"] = next(r for r in shipped["receivers"] if r["name"] == "secscan-page")[
                "email_configs"]
    (tmp_path / "am.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    write_prometheus_config(tmp_path / "prom.yml", f"127.0.0.1:{exp_port}", f"127.0.0.1:{am_port}")
    prom_config = yaml.safe_load((tmp_path / "prom.yml").read_text())
    prom_config["scrape_configs"][0]["label_value_length_limit"] = 1024
    (tmp_path / "prom.yml").write_text(yaml.safe_dump(prom_config))
    procs = [
        Process("exporter", [sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address", "127.0.0.1",
                             "--port", str(exp_port), "--snapshot", str(hostile_path)], tmp_path),
        Process("alertmanager", [alertmanager, f"--config.file={tmp_path / 'am.yml'}",
                                 f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
                                 "--cluster.listen-address="], tmp_path),
        Process("prometheus", [prometheus, f"--config.file={tmp_path / 'prom.yml'}",
                               f"--storage.tsdb.path={tmp_path / 'prom'}",
                               f"--web.listen-address=127.0.0.1:{prom_port}"], tmp_path),
    ]
    try:
        poll("Alertmanager ready", lambda: http_ok(f"http://127.0.0.1:{am_port}/-/ready"))
        slack = poll("the Slack post", lambda: [b for p, b in hooks.posts if p.startswith("/slack/")], timeout=90)
        webhook = poll("the webhook post", lambda: [b for p, b in hooks.posts if p == "/secscan-page"])
        mail = poll("the e-mail", lambda: smtp.messages, timeout=60)
    except BaseException:
        print("\n".join(f"--- {p.name} ---\n{p.tail()}" for p in procs))
        raise
    finally:
        for proc in reversed(procs):
            proc.stop()
        hooks.stop()
        smtp.stop()
    post = json.dumps(slack[0])
    fields = [a.get(k, "") for a in slack[0]["attachments"] for k in ("title", "text", "fallback", "pretext")]
    assert all("<" not in f and ">" not in f for f in fields), fields
    assert "&lt;!channel&gt;" in post and "&lt;!here&gt;" in post
    assert len(post) < 8_000 and len(json.dumps(webhook[0])) < 16_000
    for alert in webhook[0]["alerts"]:
        for value in [*alert["labels"].values(), *alert["annotations"].values()]:
            assert not FORBIDDEN.search(value) and len(value) <= 2048
    assert alert["annotations"]["project"] == "Shop evil line]0;x"
    assert slack[0]["attachments"][0]["title"] == "1 new critical issue in &lt;!everyone&gt; Acme, team unowned"
    message = email.message_from_string(mail[0])
    html = next(p for p in message.walk() if p.get_content_type() == "text/html").get_payload(decode=True).decode()
    assert "&lt;!channel&gt;" in html and "<!channel>" not in html and "<!everyone>" not in html
    assert len(mail[0]) < 64_000


def test_grafanas_slack_template_carries_service_text_inert(tmp_path):
    """Grafana-managed alerting sends labels and annotations through its own contact points: the provisioned
    `scanwatch.slack.*` templates escape them as the Alertmanager ones do. Grafana embeds Alertmanager's
    template engine, so amtool renders them as Grafana would."""
    provisioned = yaml.safe_load((ROOT / "grafana" / "provisioning" / "alerting" / "scanwatch-alerts.yml").read_text())
    (template,) = [t for t in provisioned.get("templates", []) if t["name"] == "scanwatch"]
    (tmp_path / "grafana.tmpl").write_text(template["template"])
    labels = {"alertname": "SecscanNewCriticalIssue", "workspace": "A<c>me", "project": "Shop & <b>Co</b>",
              "title": SLACK_TITLE, "address": "acme/<shop>", "location": "src/<!here>.py", "family": "code",
              "control_id": "code.sqli", "issue_id": "i1", "first_seen": "2026-11-01T10:00:00Z"}
    data = {**_group([{"status": "firing", "labels": labels, "annotations": {"what": "new critical issue",
                                                                             "runbook": "Fix <it> & go."}}] * 12),
            "commonLabels": {"alertname": "SecscanNewCriticalIssue", "workspace": "A<c>me"}}
    (tmp_path / "data.json").write_text(json.dumps(data))
    out = {}
    for name in ("scanwatch.slack.title", "scanwatch.slack.text"):
        done = subprocess.run([require("amtool"), "template", "render", f"--template.glob={tmp_path / 'grafana.tmpl'}",
                               f"--template.data={tmp_path / 'data.json'}",
                               f'--template.text={{{{ template "{name}" . }}}}'], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        out[name] = done.stdout
        assert "<" not in done.stdout and ">" not in done.stdout, (name, done.stdout)
    assert out["scanwatch.slack.title"] == "12 new critical issues in A&lt;c&gt;me"
    assert "&lt;!channel&gt; &lt;http://evil.example/login|Reset your password&gt;" in out["scanwatch.slack.text"]
    assert out["scanwatch.slack.text"].count("• ") == 10 and "12 firing in all" in out["scanwatch.slack.text"]
