"""deploy/systemd: the units of the one-host install the README's Debian steps describe.

Checked by systemd's own tools (`systemd-analyze verify` on a scratch root holding the units, the system's unit
library and the install's /opt/scanwatch/bin/scanwatch; `systemd-analyze security --offline`;
`systemd-sysusers --dry-run`), then run as the units would run them: each ExecStart with the unit's own
environment, the sync against the simulator and the exporter serving what that sync wrote. No systemd runs
here as PID 1, so the timer's schedule is checked by `systemd-analyze calendar`, not waited for.
"""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.deploy.conftest import BIN, ROOT, child_env

UNITS = ROOT / "deploy" / "systemd"
SERVICES = ("scanwatch-sync.service", "scanwatch-exporter.service")
TIMER = "scanwatch-sync.timer"
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
    shutil.copy2(BIN / "scanwatch", root / "opt/scanwatch/bin/scanwatch")
    for name in (*SERVICES, TIMER):
        shutil.copy2(UNITS / name, root / "etc/systemd/system" / name)
    return root


def test_systemd_analyze_verifies_every_unit_without_a_word(scratch_root):
    done = subprocess.run([_tool("systemd-analyze"), "verify", f"--root={scratch_root}", *SERVICES, TIMER],
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


@pytest.mark.parametrize("service", SERVICES)
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
    (enabled,) = re.findall(r"systemctl enable --now (.+)", block)
    assert set(enabled.split()) == {"scanwatch-exporter.service", TIMER}
    assert "systemctl daemon-reload" in block and "systemd-analyze verify" in block


def _command(service: str) -> list[str]:
    (line,) = _get(_unit(service), "Service", "ExecStart")
    argv = shlex.split(line)
    assert argv[0] == "/opt/scanwatch/bin/scanwatch"
    return [str(BIN / "scanwatch"), *argv[1:]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_units_commands_sync_and_then_serve_what_the_sync_wrote(sim, tmp_path):
    """Each ExecStart with its unit's environment; the state directory is a scratch folder here."""
    state = tmp_path / "var-lib-scanwatch"
    state.mkdir()

    def env_of(service: str, **extra: str) -> dict[str, str]:
        own = {k: v.replace("/var/lib/scanwatch", str(state)) for k, v in _environment(_unit(service)).items()}
        return child_env(sim, **{**own, **extra})

    synced = subprocess.run(_command("scanwatch-sync.service"), env=env_of("scanwatch-sync.service"), cwd=state,
                            capture_output=True, text=True, timeout=300)
    assert synced.returncode == 0, (synced.stdout + synced.stderr)[-3000:]

    port = _free_port()
    env = env_of("scanwatch-exporter.service", SCANWATCH_EXPORTER_PORT=str(port))
    for key in ("SCANWATCH_API_KEY", "SCANWATCH_BASE_URL"):  # the exporter's unit reads no scanwatch.env
        env.pop(key)
    proc = subprocess.Popen(_command("scanwatch-exporter.service"), env=env, cwd=state, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            while True:
                try:
                    text = http.get("/metrics").text
                    if "secscan_project_score{" in text:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "the exporter never served the sync"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode in (0, -15)  # systemd's stop (SIGTERM) ends it
