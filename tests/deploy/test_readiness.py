"""The exporter's probes over real HTTP: /-/healthy while it serves, /-/ready only once a snapshot has loaded.

The chart's readiness probe reads /-/healthy by default: an exporter is ready when it serves /metrics, and
the snapshot's state is in what it serves (`secscan_snapshot_readable 0` before the first sync), so a fresh
install passes `helm install --wait` before any sync and Prometheus sees why there are no series yet.
/-/ready stays for an operator who wants the pod out of its Service until a first part has loaded.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from exporters.server import serve
from tests.deploy.test_chart import ALL_ON, one, render
from tests.exporter.history import NOW, fresh_db, load_history
from tests.helpers import build_snapshot, write_snapshot


@pytest.fixture
def snapshot() -> dict:
    conn = fresh_db()
    try:
        load_history(conn)
        return build_snapshot(conn, now=NOW, critical_info_limit=0)
    finally:
        conn.close()


@pytest.fixture
def exporter_at(tmp_path: Path):
    path = tmp_path / "metrics.json"
    server, _ = serve(path, address="127.0.0.1", port=0)
    client = httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}", timeout=20)
    try:
        yield path, client
    finally:
        client.close()
        server.shutdown()


def _poll(client: httpx.Client, path: str, status: int, seconds: float = 20, text: str = "") -> httpx.Response:
    """Ask until the answer has `status` (and `text`): a changed file is rendered in the background, and a
    scrape keeps the previous rendering until the new one is ready."""
    deadline = time.monotonic() + seconds
    while True:
        resp = client.get(path)
        if (resp.status_code == status and text in resp.text) or time.monotonic() > deadline:
            return resp
        time.sleep(0.05)


def test_ready_answers_503_until_the_first_snapshot_loads_and_200_after(exporter_at, snapshot):
    path, client = exporter_at
    assert client.get("/-/healthy").status_code == 200
    before = client.get("/-/ready")
    assert before.status_code == 503 and "no metrics snapshot" in before.text
    assert "secscan_project_score" not in client.get("/metrics").text

    write_snapshot(snapshot, path)
    after = _poll(client, "/-/ready", 200)
    assert after.status_code == 200 and after.text == "ready\n"
    assert "secscan_project_score" in client.get("/metrics").text


def test_a_broken_first_file_is_not_ready_and_a_later_broken_file_keeps_it_ready(exporter_at, snapshot):
    path, client = exporter_at
    path.write_text("{ not json")
    assert client.get("/-/ready").status_code == 503
    assert client.get("/-/healthy").status_code == 200

    write_snapshot(snapshot, path)
    assert _poll(client, "/-/ready", 200).status_code == 200
    path.write_text("{ broken again")  # the last good snapshot keeps being served, so the pod stays in
    assert client.get("/-/ready").status_code == 200
    assert "secscan_snapshot_readable 0.0" in _poll(client, "/metrics", 200, text="secscan_snapshot_readable 0.0").text
    assert client.get("/-/ready").status_code == 200
    assert "secscan_project_score" in client.get("/metrics").text


def test_a_fresh_install_is_ready_before_the_first_sync_and_says_why_it_has_no_series(exporter_at, snapshot):
    (container,) = one(render(ALL_ON), "Deployment")["spec"]["template"]["spec"]["containers"]
    probe = container["readinessProbe"]["httpGet"]["path"]
    _, client = exporter_at  # no snapshot part written yet: the state of a new database
    assert client.get(probe).status_code == 200, probe
    text = client.get("/metrics").text
    assert "\nsecscan_snapshot_readable 0.0\n" in text and "secscan_project_score" not in text
    # The liveness probe is the same endpoint, which never depends on the pipeline.
    assert container["livenessProbe"]["httpGet"]["path"] == "/-/healthy"
