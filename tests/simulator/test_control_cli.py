"""The /_sim/ control surface over HTTP, and `scanwatch simulator` as a user starts it."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from simulator.testing import Simulator, serve_simulator

from .conftest import sim_config


def test_control_surface(sim: Simulator) -> None:
    with httpx.Client(base_url=sim.root_url + "/_sim", timeout=10) as c:
        assert c.get("/clock").json() == {"now": "2026-11-20T09:00:00.000Z", "clock": "driven"}
        assert c.post("/clock/advance", json={"seconds": 60}).json()["now"] == "2026-11-20T09:01:00.000Z"
        summary = c.post("/round", json={"fraction": 1.0}).json()
        assert summary["scans"] == 8 and summary["new"] >= 1
        keys = c.get("/keys").json()
        assert keys["pro"]["key"] == sim.api_key and keys["token_read"]["scopes"] == ["scans:read"]
        assert keys["free"]["plan"] == "free"
        assert c.post("/faults", json={"error_rate": 1.0, "scope": "lists"}).json()["error_rate"] == 1.0
        assert httpx.get(sim.base_url + "/projects", headers=sim.headers()).status_code == 500
        assert c.delete("/faults").json()["error_rate"] == 0.0
        assert c.post("/faults", json={"nonsense": 1}).status_code == 400
        tid = sim.target_ids(verified=False)[0]
        assert c.post(f"/targets/{tid}/verify", json={"verified": True}).json()["verified"] is True
        issue = c.post(f"/targets/{tid}/issues", json={"severity": "critical"}).json()
        assert issue["severity"] == "critical" and sim.world.issues[issue["id"]].status == "open"
        pid = sim.project_ids()[1]
        assert c.post(f"/projects/{pid}/pause", json={"paused": True}).json()["paused"] is True
        assert c.delete(f"/projects/{pid}").json() == {"deleted": pid}
        assert c.delete(f"/projects/{pid}").status_code == 404
        assert pid not in sim.project_ids()
        counts = c.get("/requests").json()
        assert {"method": "GET", "route": "/v1/projects", "key": "ci-key", "count": 1} in counts["by_route"]
        assert sim.request_count(key="pro", route="/v1/projects") == 1
        assert c.get("/stats").json()["projects"] == 6
        assert c.post("/rate-limit", json={"limit": 2, "window": 30}).json() == {"limit": 2, "window": 30.0}
        if time.time() % 30 > 25:  # the windows are fixed on wall time: three answers must not straddle two
            time.sleep(30 - time.time() % 30 + 0.02)
        statuses = [httpx.get(sim.base_url + "/account", headers=sim.headers()).status_code for _ in range(3)]
        assert statuses == [200, 200, 429]


def test_control_surface_is_off_unless_asked() -> None:
    with serve_simulator(sim_config(control=False)) as sim:
        r = httpx.post(sim.root_url + "/_sim/round", json={})
        assert r.status_code == 404


def test_access_log_never_shows_the_key(caplog: pytest.LogCaptureFixture) -> None:
    with serve_simulator(sim_config(access_log=True)) as sim, caplog.at_level(logging.INFO):
        httpx.get(sim.base_url + "/account", headers=sim.headers())
        httpx.get(sim.base_url + "/account", headers={"Authorization": "Bearer rst_wrong_key_here"})
        time.sleep(0.05)
        text = caplog.text
    assert "/v1/account" in text
    assert sim.api_key not in text and "rst_wrong_key_here" not in text


def test_cli_prints_url_and_a_working_key() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "simulator", "--port", "0", "--seed", "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        lines = [proc.stdout.readline() for _ in range(2)]  # type: ignore[union-attr]
        base_url = lines[0].split()[-1]
        key = lines[1].split()[-1]
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1") and key.startswith("rst_")
        r = httpx.get(base_url + "/account", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200 and r.json()["plan"] == "pro"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_stops_on_a_signal_even_when_started_with_sigint_ignored(sig: signal.Signals) -> None:
    # A script's background job (`scanwatch simulator &`) starts with SIGINT ignored; it must still stop.
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "simulator", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout.readline().startswith("base URL:")  # type: ignore[union-attr]
        proc.send_signal(sig)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_real_clock_scans_finish_on_wall_time() -> None:
    with serve_simulator(sim_config(clock="real", scan_seconds=0.3)) as sim:
        w = sim.world
        tid = next(t for t in sim.target_ids(kind="domain", verified=True)
                   if w.scans[w.targets[t].scan_ids[-1]].created_at < w.now() - 7200)
        with httpx.Client(base_url=sim.base_url, headers=sim.headers()) as c:
            sid = c.post(f"/targets/{tid}/scans").json()["id"]
            assert c.get(f"/scans/{sid}").json()["status"] == "queued"
            time.sleep(0.4)
            assert c.get(f"/scans/{sid}").json()["status"] in ("done", "failed")
            assert c.get("/projects").json()["data"][0]["last_scan_at"][:4] == time.strftime("%Y", time.gmtime())


def test_cli_autopilot_runs_rounds() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "simulator", "--port", "0", "--autopilot", "0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        lines = [proc.stdout.readline() for _ in range(4)]  # type: ignore[union-attr]
        assert lines[3].startswith("autopilot: round 1:"), lines
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0

