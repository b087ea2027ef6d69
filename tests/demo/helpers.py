"""Running `scanwatch demo` as a user would: a subprocess in its own session, on ports nobody else holds."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def free_ports(count: int) -> list[int]:
    """Distinct free ports, all held until every one is chosen so that none is handed out twice."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def prometheus_or_skip() -> str | None:
    """The prometheus binary; None (the demo then runs without it) unless CI requires it."""
    found = shutil.which("prometheus")
    if found is None and os.environ.get("SCANWATCH_REQUIRE_PROMETHEUS") == "1":
        pytest.fail("prometheus is not installed but SCANWATCH_REQUIRE_PROMETHEUS=1 (apt-get install prometheus)")
    return found


def start_demo(data_dir: Path, ports: dict[str, int], *extra: str, log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "pipelines.cli", "demo", "--data-dir", str(data_dir)]
    for name, port in ports.items():
        argv += [f"--{name}-port", str(port)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    with open(log, "wb") as out:
        return subprocess.Popen([*argv, *extra], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def get(url: str, timeout: float = 2.0) -> tuple[int | None, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (urllib.error.URLError, OSError):
        return None, ""


def wait_for(check, what: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None:
            pytest.fail(f"scanwatch demo exited ({proc.returncode}) before {what}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {timeout:.0f} s:\n{log.read_text()}")
        time.sleep(0.5)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def live_processes() -> Iterator[tuple[Path, list[str], str]]:
    """Every other live process (zombies are gone): its /proc folder, the fields of its `stat` after the
    command's name (state first; session at index 3), and its command line."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if stat and stat[0] != "Z":
            yield entry, stat, cmdline


def processes_mentioning(marker: str) -> list[str]:
    """Processes whose command line or environment names the marker (the demo's data folder).

    Every child of the demo, down to the processes `dagster dev` spawns, inherits DAGSTER_HOME and
    SCANWATCH_DB from it, so this finds leftovers however deep they are.
    """
    found = []
    for entry, _, cmdline in live_processes():
        try:
            environ = (entry / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline or marker in environ:
            found.append(f"{entry.name}: {cmdline[:160]}")
    return found


def stop(proc: subprocess.Popen) -> None:
    """Last resort for a failed test: no demo left running behind the suite."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
