"""Every line about a workspace names that workspace and its own settings: with the key in
SCANWATCH_KEY_BROKEN the line names that variable, not SCANWATCH_API_KEY; an address that came from the
workspaces file is not reported as SCANWATCH_BASE_URL. The followed names differ from the service's own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.prometheus.tools import free_port
from tests.reliability.harness import ROOT

FILE = """workspaces:
  - name: storefront
    api_key_env: SCANWATCH_KEY_STORE
  - name: broken
    api_key_env: SCANWATCH_KEY_BROKEN
  - name: elsewhere
    base_url: http://127.0.0.1:{closed}/v1
    api_key_env: SCANWATCH_KEY_ELSEWHERE
"""


@pytest.fixture(scope="module")
def deployment(tmp_path_factory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("lines")
    with serve_simulator(SimConfig(seed=9, scale="small", clock="driven", control=True, rate_limit=100000,
                                   pro_workspaces=2)) as sim:
        path = tmp / "workspaces.yml"
        path.write_text(FILE.format(closed=free_port()))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
        env.update({"SCANWATCH_WORKSPACES_FILE": str(path), "SCANWATCH_BASE_URL": sim.base_url,
                    "SCANWATCH_KEY_STORE": sim.keys["pro"], "SCANWATCH_KEY_BROKEN": sim.keys["revoked"],
                    "SCANWATCH_KEY_ELSEWHERE": sim.keys["pro_2"], "SCANWATCH_DB": str(tmp / "h.duckdb"),
                    "SCANWATCH_SNAPSHOT": str(tmp / "m.json")})
        yield env


def _sync(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=400)


def test_each_failing_workspace_names_itself_and_its_own_setting(deployment):
    done = _sync(deployment)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    broken = [ln for ln in lines if ln.startswith("scanwatch sync: workspace broken failed")]
    elsewhere = [ln for ln in lines if ln.startswith("scanwatch sync: workspace elsewhere failed")]
    assert len(broken) == 1 and len(elsewhere) == 1 and len(lines) == 2, lines
    assert "SCANWATCH_KEY_BROKEN" in broken[0] and "SCANWATCH_API_KEY" not in broken[0], broken[0]
    path = deployment["SCANWATCH_WORKSPACES_FILE"]
    assert f"the base_url of workspace elsewhere in {path}" in elsewhere[0], elsewhere[0]
    assert "SCANWATCH_BASE_URL" not in elsewhere[0] and "SCANWATCH_API_KEY" not in elsewhere[0]
    assert done.stdout.startswith("scanwatch sync: ok (storefront) in "), done.stdout
    for key in ("SCANWATCH_KEY_STORE", "SCANWATCH_KEY_BROKEN", "SCANWATCH_KEY_ELSEWHERE"):
        assert deployment[key] not in done.stderr + done.stdout
