"""`scanwatch demo` end to end: everything comes up with data, and everything it started is gone afterwards."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from urllib.parse import urlencode

import pytest

from tests.demo.helpers import (
    REPO,
    free_ports,
    get,
    listening,
    processes_mentioning,
    prometheus_or_skip,
    start_demo,
    stop,
    wait_for,
)

PORT_NAMES = ("simulator", "exporter", "dagster", "prometheus")


def _ports() -> dict[str, int]:
    return dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))


def _assert_all_gone(ports: dict[str, int], marker: str) -> None:
    still = [f"{name} ({port})" for name, port in ports.items() if listening(port)]
    assert not still, f"still listening after the demo stopped: {still}"
    leftovers = processes_mentioning(marker)
    assert not leftovers, "processes left behind:\n" + "\n".join(leftovers)


@pytest.mark.timeout(240)
def test_demo_comes_up_with_data_and_stops_clean(tmp_path):
    prometheus = prometheus_or_skip()
    ports = _ports()
    data_dir, log = tmp_path / "demo", tmp_path / "demo.out"
    started = time.monotonic()
    proc = start_demo(data_dir, ports, "--duration", "15", "--autopilot", "30", log=log)
    try:
        metrics = f"http://127.0.0.1:{ports['exporter']}/metrics"
        wait_for(lambda: "secscan_project_score{" in get(metrics)[1], "secscan_project_score on /metrics",
                 proc, log, timeout=90)
        wait_for(lambda: get(f"http://127.0.0.1:{ports['dagster']}/server_info")[0] == 200,
                 "Dagster /server_info", proc, log, timeout=120)
        up = time.monotonic() - started
        if prometheus:
            prom = f"http://127.0.0.1:{ports['prometheus']}"
            assert get(f"{prom}/-/ready")[0] == 200

            def exporter_target_up() -> bool:
                body = get(f"{prom}/api/v1/targets")[1]
                targets = json.loads(body)["data"]["activeTargets"] if body else []
                return any(t["scrapeUrl"].endswith(f":{ports['exporter']}/metrics") and t["health"] == "up"
                           for t in targets)

            wait_for(exporter_target_up, "the exporter target up in Prometheus", proc, log, timeout=30)
            rules = json.loads(get(f"{prom}/api/v1/rules")[1])["data"]["groups"]
            assert rules, "Prometheus loaded none of the project's rule files"
            # The first start backfilled the year the service already held.
            past = time.time() - 300 * 86400
            for expr in ("secscan_project_score", "secscan:issues_open:sum"):
                answer = json.loads(get(f"{prom}/api/v1/query?{urlencode({'query': expr, 'time': past})}")[1])
                assert answer["data"]["result"], f"no {expr} 300 days ago:\n{log.read_text()}"
        proc.wait(timeout=120)
        output = log.read_text()
        assert proc.returncode == 0, output
        assert "Ctrl-C" in output and f"127.0.0.1:{ports['dagster']}" in output
        assert "sync        ok in" in output
        key = re.search(r"rst_\w+", (data_dir / "logs" / "simulator.log").read_text()).group(0)
        assert key not in output, "the API key must only ever be shown masked"
    finally:
        stop(proc)
    _assert_all_gone(ports, str(data_dir))
    print(f"demo data visible after {up:.0f} s")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_signal_stops_everything_and_exits_zero(tmp_path, sig):
    ports = _ports()
    data_dir, log = tmp_path / "demo", tmp_path / "demo.out"
    proc = start_demo(data_dir, ports, "--no-dagster", "--no-prometheus", log=log)
    try:
        wait_for(lambda: "Ctrl-C to stop" in log.read_text(), "the ready banner", proc, log, timeout=90)
        # A terminal's Ctrl-C goes to the foreground process group: the demo's, not its children's.
        os.killpg(proc.pid, sig)
        proc.wait(timeout=30)
        assert proc.returncode == 0, log.read_text()
        assert "stopped" in log.read_text()
    finally:
        stop(proc)
    _assert_all_gone({k: v for k, v in ports.items() if k in ("simulator", "exporter")}, str(data_dir))


@pytest.mark.timeout(120)
def test_a_child_that_dies_stops_the_rest_with_its_name(tmp_path):
    ports = _ports()
    data_dir, log = tmp_path / "demo", tmp_path / "demo.out"
    proc = start_demo(data_dir, ports, "--no-dagster", "--no-prometheus", log=log)
    try:
        wait_for(lambda: "Ctrl-C to stop" in log.read_text(), "the ready banner", proc, log, timeout=90)
        simulator = [line.split(":", 1)[0] for line in processes_mentioning(str(data_dir))
                     if "pipelines.cli simulator" in line]
        assert simulator, "the simulator process was not found"
        os.kill(int(simulator[0]), signal.SIGKILL)
        proc.wait(timeout=30)
        output = log.read_text()
        assert proc.returncode == 1, output
        assert "simulator exited unexpectedly" in output
    finally:
        stop(proc)
    _assert_all_gone({k: v for k, v in ports.items() if k in ("simulator", "exporter")}, str(data_dir))


def test_busy_port_fails_early_naming_port_and_flag(tmp_path):
    ports = _ports()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", ports["exporter"]))
        holder.listen()
        result = subprocess.run(
            [sys.executable, "-m", "pipelines.cli", "demo", "--data-dir", str(tmp_path / "demo"), "--no-dagster",
             *(x for name, port in ports.items() for x in (f"--{name}-port", str(port)))],
            cwd=REPO, capture_output=True, text=True, timeout=30,
        )
    assert result.returncode == 2
    assert f"port {ports['exporter']}" in result.stdout and "--exporter-port" in result.stdout
    assert not (tmp_path / "demo").exists(), "nothing is created before the ports are checked"


def test_refuses_a_foreign_non_empty_data_dir(tmp_path):
    (tmp_path / "precious.txt").write_text("not the demo's")
    ports = _ports()
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "demo", "--data-dir", str(tmp_path), "--no-dagster",
         "--no-prometheus", *(x for name, port in ports.items() for x in (f"--{name}-port", str(port)))],
        cwd=REPO, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2 and "not empty" in result.stdout
    assert (tmp_path / "precious.txt").read_text() == "not the demo's"
