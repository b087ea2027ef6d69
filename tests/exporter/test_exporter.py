"""The exposition: names, types, labels and values parsed back with prometheus_client's own parser."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporters.collector import SecscanCollector
from exporters.server import serve
from exporters.source import SnapshotSource
from pipelines.snapshot.store import WHOLE
from tests.helpers import build_registry, served, write_snapshot
from tests.prometheus.tools import free_port, installed, require

ROOT = Path(__file__).resolve().parents[2]
SEVERITIES = {"critical", "high", "medium", "low", "info"}


def scrape(path: Path, critical: int = 0) -> str:
    return generate_latest(build_registry(path, critical_info_limit=critical)).decode()


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def value(text_samples: dict, name: str, **labels) -> float:
    found = [s.value for s in text_samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


@pytest.fixture
def snap_path(snapshot, tmp_path) -> Path:
    path = tmp_path / "metrics.json"
    write_snapshot(snapshot, path)
    return path


def test_architecture_metrics_with_their_labels(snap_path):
    s = samples(scrape(snap_path))
    assert value(s, "secscan_project_score", workspace="Acme", project_id="p1", project="Shop") == 72
    assert value(s, "secscan_target_score", workspace="Acme", project_id="p1", project="Shop", target_id="t1",
                 address="shop.example.com", kind="domain") == 70
    assert value(s, "secscan_issues_open", project_id="p1", severity="critical") == 3
    assert sum(x.value for x in s["secscan_issues_open"]) == 6  # equals open issues of current projects
    assert value(s, "secscan_issues_detected_total", project_id="p1", severity="high") == 3
    assert value(s, "secscan_quota_limit", workspace="Acme", quota="quick_scans") == 100
    assert value(s, "secscan_quota_used", workspace="Acme", quota="quick_scans") == 12
    assert value(s, "secscan_quota_remaining", workspace="Acme", quota="audits") == 0
    assert value(s, "secscan_sync_last_success_timestamp_seconds", workspace="Acme") == 1793489460.0
    assert "secscan_sync_last_success_timestamp_seconds" not in {x.name for x in s["secscan_plan_info"]}
    assert not [x for x in s["secscan_sync_last_success_timestamp_seconds"] if x.labels["workspace"] == "Beta"]


def test_issue_four_metrics(snap_path):
    s = samples(scrape(snap_path))
    assert value(s, "secscan_project_grade_info", project_id="p1", grade="C") == 1
    assert value(s, "secscan_target_hidden_issues", target_id="t3") == 4
    assert value(s, "secscan_issues_open_by_family", project_id="p1", family="secrets") == 2
    assert value(s, "secscan_issues_by_status", project_id="p1", status="false_positive", severity="low") == 1
    assert value(s, "secscan_issues_oldest_open_age_seconds", project_id="p1", severity="medium") == 123 * 86400
    assert value(s, "secscan_issues_sla_breached", project_id="p1", severity="critical") == 1
    assert value(s, "secscan_issues_sla_due_soon", project_id="p1", severity="high") == 1
    assert not [x for x in s["secscan_issues_sla_breached"] if x.labels["severity"] == "info"]
    assert value(s, "secscan_sla_seconds", severity="high") == 30 * 86400
    assert value(s, "secscan_scans_total", project_id="p1", kind="audit", status="failed") == 1
    assert value(s, "secscan_scans_pending", project_id="p2", kind="quick", status="queued") == 1
    assert value(s, "secscan_scans_audit_fallback_total", project_id="p1", status="done") == 1
    assert value(s, "secscan_scans_audit_fallback_total", project_id="p1", status="failed") == 0
    assert value(s, "secscan_target_coverage_ratio", target_id="t2") == 0.5
    assert value(s, "secscan_target_last_scan_failed", target_id="t1") == 1
    assert value(s, "secscan_quota_period_end_timestamp_seconds", workspace="Acme") == 1794614400.0
    assert value(s, "secscan_api_trial_end_timestamp_seconds", workspace="Beta") == 1793664000.0
    assert "Acme" not in {x.labels["workspace"] for x in s["secscan_api_trial_end_timestamp_seconds"]}
    assert value(s, "secscan_pack_credits", workspace="Acme", credit="scans") == 5
    assert value(s, "secscan_projects_limit", workspace="Acme") == 3
    assert value(s, "secscan_projects_used", workspace="Acme") == 2
    assert value(s, "secscan_projects_paused", workspace="Acme") == 1
    assert value(s, "secscan_api_access_allowed", workspace="Beta") == 1
    assert value(s, "secscan_plan_info", workspace="Acme", workspace_id="ws-1", plan="pro") == 1
    assert value(s, "secscan_pipeline_last_success_timestamp_seconds", asset="account") == 1793487610.0
    assert value(s, "secscan_api_requests_total", asset="issues") == 70
    assert value(s, "secscan_api_rate_limited_total", asset="issues") == 3
    assert value(s, "secscan_api_rate_limit_remaining", workspace="Acme") == 60
    assert value(s, "secscan_snapshot_readable") == 1
    assert value(s, "secscan_snapshot_age_seconds") > 0


def test_lifecycle_counters_preset_to_zero_for_every_project_and_severity(snap_path):
    s = samples(scrape(snap_path))
    for name in ("secscan_issues_opened_total", "secscan_issues_fixed_total", "secscan_issues_reopened_total"):
        cells = {(x.labels["project_id"], x.labels["severity"]) for x in s[name]}
        assert cells == {(p, sev) for p in ("p1", "p2", "p4") for sev in SEVERITIES}, name
    assert value(s, "secscan_issues_opened_total", project_id="p4", severity="critical") == 0
    assert value(s, "secscan_issues_opened_total", project_id="p1", severity="critical") == 3
    assert value(s, "secscan_issues_fixed_total", project_id="p1", severity="critical") == 2
    assert value(s, "secscan_issues_reopened_total", project_id="p1", severity="critical") == 1


def test_time_to_fix_histogram_parses(snap_path):
    text = scrape(snap_path)
    fam = next(f for f in text_string_to_metric_families(text) if f.name == "secscan_issue_time_to_fix_seconds")
    assert fam.type == "histogram"
    crit = [x for x in fam.samples if x.labels.get("project_id") == "p1" and x.labels.get("severity") == "critical"]
    by = {(x.name, x.labels.get("le")): x.value for x in crit}
    assert by[("secscan_issue_time_to_fix_seconds_bucket", "3600.0")] == 0
    assert by[("secscan_issue_time_to_fix_seconds_bucket", "14400.0")] == 1
    assert by[("secscan_issue_time_to_fix_seconds_bucket", "+Inf")] == 1
    assert by[("secscan_issue_time_to_fix_seconds_sum", None)] == 7200
    assert by[("secscan_issue_time_to_fix_seconds_count", None)] == 1


def test_types_and_naming(snap_path):
    for fam in text_string_to_metric_families(scrape(snap_path)):
        if not fam.name.startswith("secscan_"):
            continue
        assert fam.documentation, fam.name
        if fam.type == "counter":
            assert all(x.name.endswith("_total") for x in fam.samples), fam.name
        if fam.type == "gauge":
            assert not fam.name.endswith("_total"), fam.name


def test_label_hygiene_no_issue_content_in_labels(snap_path):
    text = scrape(snap_path, critical=50)
    banned_names = {"title", "evidence", "location", "detail", "explanation", "file", "line", "commit"}
    for fam in text_string_to_metric_families(text):
        for x in fam.samples:
            assert not banned_names & set(x.labels), (fam.name, x.labels)
            assert "A title" not in x.labels.values() and "/loc" not in x.labels.values()


def test_critical_issue_info_is_opt_in_and_capped(snap_path):
    assert "secscan_critical_issue_info" not in scrape(snap_path)
    s = samples(scrape(snap_path, critical=1))
    assert [x.labels["issue_id"] for x in s["secscan_critical_issue_info"]] == ["i1"]
    full = samples(scrape(snap_path, critical=50))["secscan_critical_issue_info"]
    assert len(full) == 2  # the snapshot itself was built with a cap of 2


def test_missing_then_corrupt_snapshot_serves_last_good_data(snap_path, snapshot):
    missing = snap_path.with_name("absent.json")
    s = samples(scrape(missing))
    assert value(s, "secscan_snapshot_readable") == 0
    assert "secscan_project_score" not in s

    source = SnapshotSource(snap_path)
    collector = SecscanCollector(source)
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    assert value(samples(generate_latest(reg).decode()), "secscan_snapshot_readable") == 1
    snap_path.write_text('{"schema": 1, "tables": {')  # a torn write the atomic writer would never produce
    s = samples(generate_latest(reg).decode())
    assert value(s, "secscan_snapshot_readable") == 0
    assert value(s, "secscan_project_score", project_id="p1") == 72  # last good data still served
    assert value(s, "secscan_snapshot_load_errors_total") == 1
    generate_latest(reg)
    assert source.get().load_errors == 1  # the same broken file counts once
    snap_path.unlink()
    s = samples(generate_latest(reg).decode())
    assert value(s, "secscan_snapshot_readable") == 0 and value(s, "secscan_project_score", project_id="p1") == 72
    write_snapshot({**snapshot, "schema": 3}, snap_path)
    assert value(samples(generate_latest(reg).decode()), "secscan_snapshot_readable") == 0
    changed = json.loads(json.dumps(snapshot))
    changed["tables"]["projects"][0]["score"] = 55
    write_snapshot(changed, snap_path)
    s = samples(generate_latest(reg).decode())
    assert value(s, "secscan_snapshot_readable") == 1 and value(s, "secscan_project_score", project_id="p1") == 55


def test_file_is_parsed_only_when_it_changes(snap_path, snapshot):
    source = SnapshotSource(snap_path)
    first = source.get()
    for _ in range(5):
        assert source.get().parts[WHOLE].doc is first.parts[WHOLE].doc
    assert source.get().loads == 1
    write_snapshot({**snapshot, "generated_at_seconds": 1.0}, snap_path)
    assert source.get().loads == 2 and served(source.get())["generated_at_seconds"] == 1.0


def test_promtool_accepts_the_exposition(snap_path):
    promtool = require("promtool")
    text = scrape(snap_path, critical=5)
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result.stdout + result.stderr


def test_http_server_serves_metrics(snap_path):
    port = free_port()
    server, _thread = serve(snap_path, address="127.0.0.1", port=port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            body = resp.read().decode()
        assert resp.status == 200 and "secscan_project_score" in body
        assert "process_resident_memory_bytes" in body
    finally:
        server.shutdown()


def test_tls(snap_path, tmp_path):
    openssl = installed("openssl")  # fails, never skips, without it: `make test-tools` installs it
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    import ssl

    port = free_port()
    server, _ = serve(snap_path, address="127.0.0.1", port=port, certfile=str(cert), keyfile=str(key))
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=5, context=ctx) as resp:
            assert "secscan_project_score" in resp.read().decode()
        with pytest.raises((OSError, http.client.HTTPException)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    finally:
        server.shutdown()


def test_cli_serves_from_scanwatch_snapshot_and_stops_on_sigterm(snap_path):
    port = free_port()
    env = {**os.environ, "SCANWATCH_SNAPSHOT": str(snap_path)}
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address", "127.0.0.1",
                             "--port", str(port)], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        body, deadline = "", time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                    body = resp.read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert 'secscan_project_score{project="Shop"' in body
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert f"http://127.0.0.1:{port}/metrics" in out and "Traceback" not in err, err


def test_cli_refuses_half_tls():
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", "exporter", "--tls-cert", "x.pem"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 2 and "--tls-key" in result.stderr


def test_exporter_command_does_not_import_duckdb_or_dagster():
    code = ("import sys; from pipelines.cli import build_parser; build_parser(['exporter']); "
            "import exporters.server; print(sorted(m for m in ('duckdb', 'dagster') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_exporter_of_a_postgresql_history_takes_its_store_without_duckdb_or_sqlglot():
    """The command asks the engine factory for the store, as `exporters/cli.py` does; the factory loads only
    that engine's module, and the store none of the statement splitter's parser."""
    code = ("import sys; from pipelines.core.history_location import HistoryLocation; "
            "from pipelines.storage.destinations.impl import engine_for; import exporters.server; "
            "where = HistoryLocation.parse('postgresql://reader@127.0.0.1:1/history'); "
            "store = engine_for(where).polled_snapshot(where); "
            "print(type(store).__name__, sorted(m for m in ('duckdb', 'dagster', 'sqlglot') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "PolledStore []"


def test_a_duckdb_history_refuses_to_hand_out_a_polled_snapshot(tmp_path):
    from pipelines.core.history_location import HistoryLocation
    from pipelines.storage.destinations import HistoryError
    from pipelines.storage.destinations.impl import engine_for

    where = HistoryLocation.parse(str(tmp_path / "history.duckdb"))
    with pytest.raises(HistoryError, match=r"holds no metrics snapshot: .*folder beside it.*--snapshot") as caught:
        engine_for(where).polled_snapshot(where)
    assert "\n" not in str(caught.value)


def test_a_snapshot_that_parses_but_is_malformed_never_fails_a_scrape(snap_path, snapshot):
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(SecscanCollector(SnapshotSource(snap_path)))
    assert value(samples(generate_latest(reg).decode()), "secscan_snapshot_readable") == 1
    broken = json.loads(json.dumps(snapshot))
    del broken["tables"]["projects"][0]["project_id"]  # e.g. written by a mismatched build
    write_snapshot(broken, snap_path)
    for _ in range(2):
        s = samples(generate_latest(reg).decode())
        assert value(s, "secscan_snapshot_readable") == 0
        assert value(s, "secscan_snapshot_load_errors_total") == 1
        assert value(s, "secscan_project_score", project_id="p1") == 72  # the last good document
    for field, wrong in (("project", 123), ("grade", ["A"])):  # label values the encoder cannot escape
        broken = json.loads(json.dumps(snapshot))
        broken["tables"]["projects"][0][field] = wrong
        write_snapshot(broken, snap_path)
        s = samples(generate_latest(reg).decode())
        assert value(s, "secscan_snapshot_readable") == 0
        assert value(s, "secscan_project_score", project_id="p1") == 72
    fresh = CollectorRegistry(auto_describe=False)
    fresh.register(SecscanCollector(SnapshotSource(snap_path)))
    s = samples(generate_latest(fresh).decode())  # nothing good seen yet: only the health series
    assert value(s, "secscan_snapshot_readable") == 0 and "secscan_project_score" not in s


def test_label_values_are_escaped_by_the_library(snap_path, snapshot):
    changed = json.loads(json.dumps(snapshot))
    changed["tables"]["projects"][0]["project"] = 'Sh"op\\x\nnew'  # the line break is made a space
    write_snapshot(changed, snap_path)
    assert 'project="Sh\\"op\\\\x new"' in scrape(snap_path)


def test_http_paths(snap_path):
    port = free_port()
    server, _thread = serve(snap_path, address="127.0.0.1", port=port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/healthy", timeout=5) as resp:
            assert resp.read() == b"ok\n"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            text = resp.read().decode()
        families = {f.name for f in text_string_to_metric_families(text)}
        assert {"secscan_project_score", "secscan_snapshot_readable", "process_resident_memory_bytes"} <= families
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nope", timeout=5)
        assert err.value.code == 404
    finally:
        server.shutdown()
