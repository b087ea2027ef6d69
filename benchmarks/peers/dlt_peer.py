"""dlt as a peer: its own environment (`benchmarks/.venv-dlt`, made on demand with uv, gitignored) and the
calls into `dlt_pipeline.py` there. dlt is never a dependency of scanwatch; when it cannot be installed the
benchmark says so and keeps the naive peer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.syncing import measured_child

ENV_DIR = Path(__file__).resolve().parent.parent / ".venv-dlt"
SCRIPT = Path(__file__).resolve().parent / "dlt_pipeline.py"
REQUIREMENT = "dlt[duckdb]>=1.31,<2"


class DltUnavailable(RuntimeError):
    """dlt could not be installed in the benchmark's environment (no network, no uv...)."""


def _uv() -> list[str]:
    """A uv to call: a module of this or the system interpreter, else the `uv` program."""
    for python in (sys.executable, shutil.which("python3") or "", getattr(sys, "_base_executable", "")):
        if python and subprocess.run([python, "-m", "uv", "--version"], capture_output=True).returncode == 0:
            return [python, "-m", "uv"]
    if shutil.which("uv"):
        return ["uv"]
    raise DltUnavailable("uv is not installed (`python3 -m pip install uv`)")


def ensure_env() -> Path:
    """The environment's python, creating the environment first when it is missing."""
    python = ENV_DIR / "bin" / "python"
    marker = ENV_DIR / ".installed"
    if marker.exists() and python.exists():
        return python
    uv = _uv()
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    base = getattr(sys, "_base_executable", sys.executable)
    steps = [[*uv, "venv", "-q", "--allow-existing", "-p", base, str(ENV_DIR)],
             [*uv, "pip", "install", "-q", "-p", str(python), REQUIREMENT]]
    for cmd in steps:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise DltUnavailable(f"`{' '.join(cmd[-4:])}` failed: {(done.stderr or done.stdout).strip()[-300:]}")
    marker.write_text(REQUIREMENT + "\n", encoding="utf-8")
    return python


@dataclass
class DltRun:
    success: bool
    seconds: float
    max_rss_mb: float
    output: dict[str, Any]
    error: str | None = None


def run(python: Path, base_url: str, api_key: str, workdir: Path) -> DltRun:
    code, seconds, rss, out = measured_child([str(python), str(SCRIPT), "run", base_url, str(workdir)],
                                             env={"SCANWATCH_API_KEY": api_key})
    result = _last_json(out)
    return DltRun(success=code == 0 and result is not None, seconds=seconds, max_rss_mb=rss, output=result or {},
                  error=None if code == 0 else (out.strip().splitlines() or [f"exit {code}"])[-1])


def history(python: Path, workdir: Path, ids: dict[str, list[str]]) -> dict[str, Any]:
    done = subprocess.run([str(python), str(SCRIPT), "history", str(workdir), json.dumps(ids)],
                          capture_output=True, text=True, timeout=300)
    return _last_json(done.stdout) or {"error": (done.stderr or "").strip()[-300:]}


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None
