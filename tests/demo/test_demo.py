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
import urllib.request
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


# Seconds the demo runs once up: room for the daemon's first sensor tick and, should that tick come before
# the clock is moved, the next one (the sensor's interval is 60 s).
DURATION = 80


def _advance_the_simulator(port: int, seconds: float) -> None:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/_sim/clock/advance", method="POST",
                                     data=json.dumps({"seconds": seconds}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200


@pytest.mark.timeout(480)
def test_demo_comes_up_with_data_and_stops_clean(tmp_path):
    """Everything comes up with data, the scan sensor fires, and everything stops at the end of --duration.

    Mutation that fails it (and passed the former CI, where the sensor was awaited only in the soak): the
    scan sensor created with `default_status=dg.DefaultSensorStatus.STOPPED`."""
    prometheus = prometheus_or_skip()
    ports = _ports()
    data_dir, log = tmp_path / "demo", tmp_path / "demo.out"
    started = time.monotonic()
    proc = start_demo(data_dir, ports, "--duration", str(DURATION), "--autopilot", "30", log=log)
    try:
        # The scan the demo requested at start is in the first sync, queued. Once that sync is over, the
        # simulator's clock is moved past the scan's minute (its control API, as `scanwatch simulator
        # --control` offers) so the scan is done when Dagster's daemon first ticks the sensor.
        wait_for(lambda: "sync        ok" in log.read_text(), "the first sync", proc, log, timeout=240)
        assert "scan        requested on" in log.read_text()
        _advance_the_simulator(ports["simulator"], 120)
        metrics = f"http://127.0.0.1:{ports['exporter']}/metrics"
        # Two workspaces are followed: both appear, under the names of the demo's workspaces file.
        wait_for(lambda: all(f'workspace="{name}"' in get(metrics)[1] for name in ("acme", "globex")),
                 "secscan_project_score of both workspaces on /metrics", proc, log, timeout=240)
        wait_for(lambda: get(f"http://127.0.0.1:{ports['dagster']}/server_info")[0] == 200,
                 "Dagster /server_info", proc, log, timeout=120)
        up = time.monotonic() - started
        assert _location_names(ports["dagster"]) == ["scanwatch"]
        # The scan sensor fires: a refresh of the scanned project, started by Dagster's daemon in the demo.
        wait_for(lambda: _sensor_runs(ports["dagster"]) > 0, "a run started by the scan sensor", proc, log,
                 timeout=DURATION)
        fired = time.monotonic() - started
        wait_for(lambda: "Stopping in" in log.read_text(), "the banner", proc, log, timeout=60)
        _assert_the_sql_line_works_when_pasted(log.read_text(), tmp_path)
        _assert_dagster_first_screen(ports["dagster"], log.read_text())
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
            links = re.findall(rf"{re.escape(prom)}/\S+", log.read_text())
            assert len(links) == 3, links
            for link in links:  # as a user's browser would open them (redirects followed)
                assert get(link, timeout=10)[0] == 200, link
        proc.wait(timeout=120)
        output = log.read_text()
        assert proc.returncode == 0, output
        assert "Ctrl-C" in output and f"127.0.0.1:{ports['dagster']}" in output
        assert "sync        ok (acme, globex) in" in output
        # Started with `dg dev`: `dagster dev` warns that it is superseded by it.
        assert "SupersessionWarning" not in (data_dir / "logs" / "dagster.log").read_text()
        key = re.search(r"rst_\w+", (data_dir / "logs" / "simulator.log").read_text()).group(0)
        assert key not in output, "the API key must only ever be shown masked"
    finally:
        stop(proc)
    _assert_all_gone(ports, str(data_dir))
    print(f"demo data visible after {up:.0f} s, the scan sensor's run after {fired:.0f} s")


def _graphql(dagster_port: int, query: str) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{dagster_port}/graphql",
                                     data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())["data"]


def _location_names(dagster_port: int) -> list[str]:
    data = _graphql(dagster_port, "{ workspaceOrError { ... on Workspace { locationEntries { name } } } }")
    return [e["name"] for e in data["workspaceOrError"]["locationEntries"]]


def _assert_dagster_first_screen(dagster_port: int, banner: str) -> None:
    """No "join the community" pop-up, and the banner's asset-graph link opens a group that draws assets
    (a repository@location and group Dagster knows), not the global graph of folded group boxes."""
    assert _graphql(dagster_port, "{ shouldShowNux }") == {"shouldShowNux": False}
    link = re.search(rf"http://127\.0\.0\.1:{dagster_port}/locations/([^@/\s]+)@([^/\s]+)/asset-groups/(\w+)\s",
                     banner)
    assert link, banner
    repository, location, group = link.groups()
    selector = f'groupName: "{group}", repositoryName: "{repository}", repositoryLocationName: "{location}"'
    data = _graphql(dagster_port, f"{{ assetNodes(group: {{{selector}}}) {{ assetKey {{ path }} }} }}")
    keys = {"/".join(n["assetKey"]["path"]) for n in data["assetNodes"]}
    assert {"account", "projects", "targets", "scans", "issues"} <= keys, keys


def _sensor_runs(dagster_port: int) -> int:
    try:
        data = _graphql(dagster_port, '{ runsOrError(filter: {tags: [{key: "scanwatch/trigger", '
                                      'value: "scan_finished"}]}) { ... on Runs { results { runId } } } }')
    except OSError:
        return 0
    return len(data["runsOrError"]["results"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_scan_sensor_visibly_fires_in_the_demo(tmp_path):
    """The scan the demo requests at start is queued in the first sync; once it is done the sensor starts a
    refresh of its project, which shows in Dagster's runs."""
    ports = _ports()
    data_dir, log = tmp_path / "demo", tmp_path / "demo.out"
    proc = start_demo(data_dir, ports, "--no-prometheus", "--duration", "420", log=log)
    try:
        wait_for(lambda: "Stopping in" in log.read_text(), "the banner", proc, log, timeout=180)
        assert "scan        requested on" in log.read_text()
        wait_for(lambda: _sensor_runs(ports["dagster"]) > 0, "a run started by the scan sensor", proc, log,
                 timeout=300)
    finally:
        stop(proc)
    _assert_all_gone(ports, str(data_dir))


def _assert_the_sql_line_works_when_pasted(banner: str, elsewhere) -> None:
    """Pasted into a shell without the venv on the PATH, from another folder, it lists the cookbook."""
    line = next(ln for ln in banner.splitlines() if "SQL cookbook" in ln)
    command = line.split("SQL cookbook", 1)[1].split("   (", 1)[0].strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_")}
    env["PATH"] = "/usr/bin:/bin"
    result = subprocess.run(command, shell=True, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, (command, result.stdout, result.stderr)
    assert "sla_breaches" in result.stdout
    # Every cookbook query, pasted while the demo's schedules and sensor write the history: each is served
    # within its wait for a writer; none exits 75 (7 of the 15 did when a busy history was refused at once).
    names = [ln.split()[0] for ln in result.stdout.splitlines()[2:] if ln.strip()]
    assert len(names) >= 15, result.stdout
    for name in names:
        done = subprocess.run(f"{command} {name} --format csv", shell=True, cwd=elsewhere, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (name, done.stderr)


@pytest.mark.timeout(360)
@pytest.mark.parametrize("sig", [  # one handler takes both; CI stops the demo as a terminal does
    pytest.param(signal.SIGINT, id="ctrl-c"), pytest.param(signal.SIGTERM, id="sigterm", marks=pytest.mark.slow)])
def test_signal_stops_everything_and_exits_zero(tmp_path, sig):
    ports = _ports()
    data_dir, log = tmp_path / "demo", tmp_path / "demo.out"
    proc = start_demo(data_dir, ports, "--no-dagster", "--no-prometheus", log=log)
    try:
        wait_for(lambda: "Ctrl-C to stop" in log.read_text(), "the ready banner", proc, log, timeout=240)
        # A terminal's Ctrl-C goes to the foreground process group: the demo's, not its children's.
        os.killpg(proc.pid, sig)
        proc.wait(timeout=30)
        assert proc.returncode == 0, log.read_text()
        # The last line says that everything the demo started has stopped, naming each part.
        last = log.read_text().strip().splitlines()[-1]
        assert last.startswith("scanwatch demo: everything stopped (simulator, exporter)"), last
        assert "no process of the demo is left" in last, last
    finally:
        stop(proc)
    _assert_all_gone({k: v for k, v in ports.items() if k in ("simulator", "exporter")}, str(data_dir))


@pytest.mark.timeout(360)
def test_a_child_that_dies_stops_the_rest_with_its_name(tmp_path):
    ports = _ports()
    data_dir, log = tmp_path / "demo", tmp_path / "demo.out"
    proc = start_demo(data_dir, ports, "--no-dagster", "--no-prometheus", log=log)
    try:
        wait_for(lambda: "Ctrl-C to stop" in log.read_text(), "the ready banner", proc, log, timeout=240)
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
