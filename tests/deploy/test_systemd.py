"""deploy/systemd: the units of the one-host install the README's Debian steps describe.

Checked by systemd's own tools (`systemd-analyze verify` on a scratch root holding the units, the system's unit
library and the install's /opt/scanwatch/bin/scanwatch; `systemd-analyze security --offline`;
`systemd-sysusers --dry-run`), then run as the units would run them: the exporter's ExecStart with its unit's
own environment, and the Dagster units' code location loaded by the daemon's environment and workspace file.
No systemd runs here as PID 1, so the timer's schedule is checked by `systemd-analyze calendar`, not waited
for; `scanwatch sync` itself is run by the rest of the suite.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.deploy.conftest import BIN, ROOT

UNITS = ROOT / "deploy" / "systemd"
SERVICES = ("scanwatch-sync.service", "scanwatch-exporter.service")
DAGSTER = ("scanwatch-code.service", "scanwatch-dagster-daemon.service", "scanwatch-dagster-webserver.service")
TIMER = "scanwatch-sync.timer"
ALL_UNITS = (*SERVICES, *DAGSTER, TIMER)
README = ROOT / "README.md"


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} not found: run `make test-tools` (Debian's systemd package)"
    return found


def _unit(name: str) -> dict[str, list[tuple[str, str]]]:
    """A unit's sections as (key, value) lists: keys repeat in systemd's format (Environment=...)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in (UNITS / name).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
        else:
            key, _, value = line.partition("=")
            current.append((key.strip(), value.strip()))
    return sections


def _get(unit: dict, section: str, key: str) -> list[str]:
    return [v for k, v in unit[section] if k == key]


def _environment(unit: dict) -> dict[str, str]:
    return dict(item.split("=", 1) for value in _get(unit, "Service", "Environment") for item in shlex.split(value))


@pytest.fixture(scope="module")
def scratch_root(tmp_path_factory) -> Path:
    """A root as the install leaves it: the units in /etc/systemd/system, systemd's own units, and
    /opt/scanwatch/bin/scanwatch (the virtual environment's entry point, a copy of this one)."""
    root = tmp_path_factory.mktemp("root")
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "usr/lib/systemd").mkdir(parents=True)
    shutil.copytree("/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    (root / "opt/scanwatch/bin").mkdir(parents=True)
    for entry in ("scanwatch", "dagster", "dagster-daemon", "dagster-webserver"):
        shutil.copy2(BIN / entry, root / "opt/scanwatch/bin" / entry)
    for name in ALL_UNITS:
        shutil.copy2(UNITS / name, root / "etc/systemd/system" / name)
    return root


def test_systemd_analyze_verifies_every_unit_without_a_word(scratch_root):
    done = subprocess.run([_tool("systemd-analyze"), "verify", f"--root={scratch_root}", *ALL_UNITS],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr


def test_systemd_analyze_refuses_a_broken_unit(scratch_root, tmp_path):
    """The check above can fail: a unit whose timer has no valid schedule is refused."""
    root = tmp_path / "broken"
    shutil.copytree(scratch_root, root, symlinks=True)
    timer = root / "etc/systemd/system" / TIMER
    timer.write_text(timer.read_text().replace("OnCalendar=*:0/15", "OnCalendar=every 15 minutes"))
    done = subprocess.run([_tool("systemd-analyze"), "verify", f"--root={root}", TIMER], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "calendar" in done.stderr, done.stderr


@pytest.mark.parametrize("service", (*SERVICES, *DAGSTER))
def test_each_service_is_confined(scratch_root, service):
    done = subprocess.run([_tool("systemd-analyze"), "security", "--offline=yes", f"--root={scratch_root}", service],
                          capture_output=True, text=True, timeout=60)
    found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", done.stdout + done.stderr)
    assert found, done.stdout + done.stderr
    assert float(found.group(1)) <= 2.0, done.stdout  # systemd rates up to 2.0 "OK"; a bare service is 9.6
    unit = _unit(service)
    assert _get(unit, "Service", "User") == ["scanwatch"] and _get(unit, "Service", "ProtectSystem") == ["strict"]


def test_the_timer_runs_the_sync_every_15_minutes_and_the_user_is_made_by_sysusers(tmp_path):
    timer = _unit(TIMER)
    assert _get(timer, "Timer", "Unit") == ["scanwatch-sync.service"]
    assert _get(timer, "Timer", "Persistent") == ["true"] and _get(timer, "Install", "WantedBy") == ["timers.target"]
    (schedule,) = _get(timer, "Timer", "OnCalendar")
    shown = subprocess.run([_tool("systemd-analyze"), "calendar", "--iterations=3", schedule], capture_output=True,
                           text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"Normalized form: \*-\*-\* \*:00/15:00", shown.stdout), shown.stdout
    sync = _unit("scanwatch-sync.service")
    assert _get(sync, "Service", "Type") == ["oneshot"]  # a timer never starts a second one while it runs
    made = subprocess.run([_tool("systemd-sysusers"), "--dry-run", f"--root={tmp_path}",
                           str(UNITS / "scanwatch.sysusers.conf")], capture_output=True, text=True, timeout=30)
    assert made.returncode == 0 and "Creating user 'scanwatch'" in made.stdout + made.stderr, made.stderr


def test_only_the_sync_reads_the_api_key_and_both_use_one_history():
    sync, exporter = (_unit(s) for s in SERVICES)
    assert _get(sync, "Service", "EnvironmentFile") == ["/etc/scanwatch/scanwatch.env"]
    assert _get(exporter, "Service", "EnvironmentFile") == ["-/etc/scanwatch/exporter.env"]
    # The exporter serves the snapshot beside the history the sync writes (both default to it).
    assert _environment(sync)["SCANWATCH_DB"] == _environment(exporter)["SCANWATCH_DB"]
    assert _environment(exporter)["SCANWATCH_DB"].startswith("/var/lib/" + _get(sync, "Service", "StateDirectory")[0])
    # The README's scrape job reaches the exporter where the unit listens.
    assert _environment(exporter)["SCANWATCH_EXPORTER_ADDRESS"] == "127.0.0.1"
    assert '["localhost:' + _environment(exporter)["SCANWATCH_EXPORTER_PORT"] + '"]' in README.read_text()


def test_the_readmes_systemd_steps_install_these_units_and_enable_them():
    text = README.read_text()
    at = text.index("<!-- systemd-steps")
    block = re.compile(r"```sh\n(.*?)```", re.DOTALL).search(text, at).group(1)
    installed = set(re.findall(r"deploy/systemd/(\S+)", block))
    assert installed == {p.name for p in UNITS.iterdir()}, installed
    (enabled,) = re.findall(r"^systemctl enable --now (.+)", block, re.M)
    assert set(enabled.split()) == {"scanwatch-exporter.service", TIMER}
    assert "systemctl daemon-reload" in block and "systemd-analyze verify" in block
    # Dagster's way, the alternative: its three units, the workspace file they read, its instance file.
    (dagster,) = re.findall(r"^# *systemctl enable --now (.+)", block, re.M)
    assert set(dagster.split()) == set(DAGSTER) | {"scanwatch-exporter.service"}
    workspace = set(re.findall(r"-w (\S+)", " ".join(_get(_unit(u), "Service", "ExecStart")[0] for u in DAGSTER[1:])))
    assert workspace == {"/etc/scanwatch/workspace.yaml"}
    assert "deploy/dagster/workspace.yaml /etc/scanwatch/workspace.yaml" in block
    assert "dagster.yaml /var/lib/scanwatch/dagster/dagster.yaml" in block


def _command(service: str) -> list[str]:
    (line,) = _get(_unit(service), "Service", "ExecStart")
    argv = shlex.split(line)
    assert argv[0] == "/opt/scanwatch/bin/scanwatch"
    return [str(BIN / "scanwatch"), *argv[1:]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_exporter_units_command_serves_with_the_units_environment_alone(tmp_path):
    """The exporter's ExecStart with its unit's environment (no scanwatch.env: no API key, no service address)
    serves where the README's scrape job looks; the state directory is a scratch folder here, and the port a
    free one. What the sync unit writes there is the default snapshot beside the same SCANWATCH_DB (above)."""
    state = tmp_path / "var-lib-scanwatch"
    state.mkdir()
    port = _free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    own = {k: v.replace("/var/lib/scanwatch", str(state)) for k, v in
           _environment(_unit("scanwatch-exporter.service")).items()}
    proc = subprocess.Popen(_command("scanwatch-exporter.service"), cwd=state, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**base, **own, "SCANWATCH_EXPORTER_PORT": str(port)})
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            while True:
                try:
                    if http.get("/-/healthy").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "the exporter never served"
                time.sleep(0.2)
            assert "secscan_snapshot_readable 0.0" in http.get("/metrics").text  # no sync yet: it says so
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode in (0, -15)  # systemd's stop (SIGTERM) ends it


def test_the_dagster_units_find_the_code_location_the_code_unit_serves(tmp_path):
    """The code unit's command and environment start the gRPC server; the daemon's environment and workspace
    file (deploy/dagster/workspace.yaml, installed as /etc/scanwatch/workspace.yaml) load it. The port is
    moved to a free one on both sides, as an operator would change it."""
    port = str(_free_port())
    code = _unit("scanwatch-code.service")
    (line,) = _get(code, "Service", "ExecStart")
    argv = shlex.split(line)
    assert argv[0] == "/opt/scanwatch/bin/dagster" and argv[argv.index("-h") + 1] == "127.0.0.1"
    argv[argv.index("-p") + 1] = port
    home = tmp_path / "dagster"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env = {**base, **_environment(code), "DAGSTER_HOME": str(home), "SCANWATCH_DB": str(tmp_path / "h.duckdb"),
           "SCANWATCH_BASE_URL": "http://127.0.0.1:9/v1", "SCANWATCH_API_KEY": "rst_unused"}
    server = subprocess.Popen([str(BIN / "dagster"), *argv[1:]], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not _listening(int(port)):
            assert server.poll() is None and time.monotonic() < deadline, "the code location never listened"
            time.sleep(0.2)
        daemon_env = {**base, **_environment(_unit("scanwatch-dagster-daemon.service")), "DAGSTER_HOME": str(home),
                      "SCANWATCH_CODE_PORT": port}
        assert daemon_env["SCANWATCH_CODE_HOST"] == "127.0.0.1"
        loaded = subprocess.run([str(BIN / "dagster"), "definitions", "validate", "-w",
                                 str(ROOT / "deploy/dagster/workspace.yaml")], env=daemon_env,
                                capture_output=True, text=True, timeout=120)
        assert loaded.returncode == 0, (loaded.stdout + loaded.stderr)[-3000:]
        assert "scanwatch" in loaded.stdout + loaded.stderr
    finally:
        server.terminate()  # what systemd's stop sends first; then SIGKILL after TimeoutStopSec
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
