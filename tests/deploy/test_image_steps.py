"""What the image does, done here without a container engine: the Dockerfile's steps on a fresh virtual
environment, then each role the image plays.

The build context is the Dockerfile's own COPY list (a file the build stage does not copy is not there), the
wheel is built from it and installed non-editable with constraints.txt, and everything then runs from
outside the checkout: the code location loads and serves gRPC as Dagster's chart starts it, a sync runs
against the simulator, the exporter serves (its HEALTHCHECK command passes, /-/ready turns 200), and
`config export` writes the package's files. hadolint checks the Dockerfile itself.
"""

from __future__ import annotations

import json
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

from tests.deploy.conftest import BIN, ROOT, child_env
from tests.pg_server import free_port

DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line.strip() else "")
            for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for op, args in _instructions():
        if op == "FROM":
            stages.append([])
        stages[-1].append((op, args))
    return stages


def _uv(*args: str, timeout: float = 600) -> None:
    """uv as the Makefile runs it (`python3 -m uv`, which `make install` provides)."""
    python = shutil.which("python3")
    assert python, "python3 not on PATH"
    # Without `make install`'s byte-compiling (UV_COMPILE_BYTECODE, exported by the Makefile): the image installs
    # with `pip install --no-compile`, and compiling every dependency was most of this test's CPU.
    env = {k: v for k, v in os.environ.items() if k != "UV_COMPILE_BYTECODE"}
    done = subprocess.run([python, "-m", "uv", *args], capture_output=True, text=True, timeout=timeout,
                          env={**env, "UV_PYTHON_DOWNLOADS": "never"})
    assert done.returncode == 0, f"uv {args[0]}: {(done.stdout + done.stderr)[-3000:]}"


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory) -> Path:
    """The build stage's context and wheel, then the final stage's install, on a fresh virtual environment."""
    build, final = _stages()
    context = tmp_path_factory.mktemp("context")
    for op, args in build:
        if op == "COPY" and not args.startswith("--"):
            *sources, _dest = shlex.split(args)
            for src in sources:
                path = ROOT / src.rstrip("/")
                if path.is_dir():
                    shutil.copytree(path, context / src.rstrip("/"),
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                else:
                    shutil.copy2(path, context / src)
    (wheel_cmd,) = [args for op, args in build if op == "RUN"]
    assert wheel_cmd.startswith("pip wheel --no-deps --wheel-dir /dist ."), wheel_cmd
    dist = tmp_path_factory.mktemp("dist")
    _uv("build", "--wheel", "--out-dir", str(dist), str(context))
    (wheel,) = dist.glob("scanwatch-*.whl")

    (install,) = [args for op, args in final if op == "RUN" and "pip install" in args]
    assert "--no-compile -c /tmp/constraints.txt /tmp/dist/scanwatch-*.whl" in install and "-e " not in install
    venv = tmp_path_factory.mktemp("image") / "venv"
    _uv("venv", "-q", "-p", "python3.11", str(venv))
    _uv("pip", "install", "-q", "-p", str(venv), "-c", str(ROOT / "constraints.txt"), str(wheel))
    return venv


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_the_dockerfile_passes_hadolint():
    done = subprocess.run([str(BIN / "hadolint"), str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_final_stage_is_slim_non_root_and_has_a_health_check():
    _build, final = _stages()
    assert final[0] == ("FROM", "python:3.11-slim-bookworm")
    (user,) = [args for op, args in final if op == "USER"]
    assert not user.startswith(("0", "root"))
    (cmd,) = [args for op, args in final if op == "CMD"]
    assert json.loads(cmd) == ["scanwatch", "exporter"]
    assert not [op for op, _ in final if op == "ENTRYPOINT"]  # Dagster's chart gives the whole command
    (check,) = [args for op, args in final if op == "HEALTHCHECK"]
    assert "/-/healthy" in check


def test_the_installed_wheel_does_each_job_of_the_image(image_venv, sim, pg_database, tmp_path):
    from urllib.parse import unquote, urlsplit

    bin_dir = image_venv / "bin"
    work = tmp_path / "work"  # outside the checkout: only the installed package's files can be found
    home = tmp_path / "dagster_home"
    work.mkdir()
    home.mkdir()
    shutil.copy(ROOT / "deploy/dagster/dagster.yaml", home / "dagster.yaml")
    url = urlsplit(pg_database)
    env = child_env(sim, DAGSTER_HOME=str(home), SCANWATCH_DB=str(work / "scanwatch.duckdb"),
                    PATH=f"{bin_dir}:/usr/bin:/bin", DAGSTER_PG_HOST=url.hostname, DAGSTER_PG_PORT=str(url.port),
                    DAGSTER_PG_USER=unquote(url.username), DAGSTER_PG_PASSWORD=unquote(url.password),
                    DAGSTER_PG_DB=url.path.lstrip("/"))

    def run(*cmd: str, timeout: float = 300) -> subprocess.CompletedProcess:
        done = subprocess.run([str(bin_dir / cmd[0]), *cmd[1:]], env=env, cwd=work, capture_output=True,
                              text=True, timeout=timeout)
        assert done.returncode == 0, f"{cmd}: {(done.stdout + done.stderr)[-3000:]}"
        return done

    located = run("python", "-c", "import pipelines, exporters; print(pipelines.__file__)").stdout
    assert str(image_venv) in located and str(ROOT) not in located  # the wheel, not the checkout

    # The code location: definitions load, and the gRPC server Dagster's chart starts answers its health check.
    run("dagster", "definitions", "validate", "-m", "pipelines.definitions")
    port = free_port()
    server = subprocess.Popen([str(bin_dir / "dagster"), "api", "grpc", "-h", "127.0.0.1", "-p", str(port),
                               "-m", "pipelines.definitions"], env=env, cwd=work, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        # The port first (a socket is cheap), then the health check as the chart's probe runs it: each check is
        # a process importing Dagster without bytecode, as the image has it, and polling with it every second
        # was most of this test's CPU.
        deadline = time.monotonic() + 120
        while not _accepts(port):
            assert server.poll() is None, "the code server exited"
            assert time.monotonic() < deadline, "the code server never listened"
            time.sleep(0.2)
        while True:
            check = subprocess.run([str(bin_dir / "dagster"), "api", "grpc-health-check", "-p", str(port)],
                                   env=env, capture_output=True, text=True)
            if check.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        server.terminate()
        server.wait(30)

    # A sync against the simulator, then the exporter serving what it wrote.
    run("scanwatch", "sync")
    assert [p.suffix for p in (work / "scanwatch-metrics.json").iterdir()] == [".json"]  # the workspace's part
    port = free_port()
    exporter = subprocess.Popen([str(bin_dir / "scanwatch"), "exporter", "--port", str(port),
                                 "--listen-address", "127.0.0.1"], env=env, cwd=work,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/-/ready", timeout=5)
                if ready.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the exporter never answered /-/ready with 200"
            time.sleep(0.2)
        assert "secscan_project_score" in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        (check,) = [args for op, args in _stages()[1] if op == "HEALTHCHECK"]
        command = json.loads(check[check.index("CMD") + 3:].strip())
        assert command[0] == "python"
        run(*[part.replace(":9817/", f":{port}/") for part in command], timeout=30)
    finally:
        exporter.terminate()
        exporter.wait(30)

    # Provisioning files from the installed package.
    out = work / "exported"
    run("scanwatch", "config", "export", str(out))
    for rel in ("prometheus/rules/secscan-alerts.yml", "prometheus/templates/secscan.tmpl",
                "prometheus/alertmanager.yml", "grafana/dashboards/scanwatch-overview.json",
                "grafana/provisioning/datasources/scanwatch.yml"):
        assert (out / rel).read_bytes() == (ROOT / rel).read_bytes(), rel
