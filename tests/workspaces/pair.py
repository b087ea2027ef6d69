"""The demo's two workspaces, followed under names that differ from the service's ("Acme Corp" as `acme`,
"Pro Workspace 2" as `globex`), beside a third whose key the service refuses (`initech`): one real
`scanwatch sync` of the three against the simulator over HTTP, as `scanwatch simulator --workspaces 2` and the
demo's workspaces file make them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.testing import SimConfig, serve_simulator
from tests.demo.helpers import live_processes

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("acme", "globex")  # followed and synced; `initech` fails in its account step
FILE = """workspaces:
  - name: acme
    api_key_env: SCANWATCH_KEY_ACME
  - name: globex
    api_key_env: SCANWATCH_KEY_GLOBEX
  - name: initech
    api_key_env: SCANWATCH_KEY_INITECH
"""


@dataclass
class Pair:
    sim: object
    env: dict[str, str]
    db: Path
    snapshot: Path
    sync: subprocess.CompletedProcess
    service_names: dict[str, str]  # followed name -> the service's workspace name

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)


def environment(sim: Any, tmp: Path, db: str) -> dict[str, str]:
    """The command's environment for the three workspaces of `FILE` (written to `tmp`) on the simulator `sim`
    (two Pro workspaces), the history at `db`, and no other `SCANWATCH_` variable of the caller's."""
    (tmp / "workspaces.yml").write_text(FILE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_") and k != "DAGSTER_HOME"}
    env.update({
        "SCANWATCH_WORKSPACES_FILE": str(tmp / "workspaces.yml"), "SCANWATCH_BASE_URL": sim.base_url,
        "SCANWATCH_KEY_ACME": sim.keys["pro"], "SCANWATCH_KEY_GLOBEX": sim.keys["pro_2"],
        "SCANWATCH_KEY_INITECH": sim.keys["revoked"],
        "SCANWATCH_DB": db, "SCANWATCH_SNAPSHOT": str(tmp / "scanwatch-metrics.json"),
    })
    return env


@contextmanager
def synced_pair(tmp: Path, seed: int = 7) -> Iterator[Pair]:
    with serve_simulator(SimConfig(seed=seed, scale="small", clock="driven", control=True, rate_limit=100000,
                                   pro_workspaces=2)) as sim:
        env = environment(sim, tmp, str(tmp / "history.duckdb"))
        pair = Pair(sim, env, tmp / "history.duckdb", tmp / "scanwatch-metrics.json", None,  # type: ignore[arg-type]
                    {"acme": "Acme Corp", "globex": "Pro Workspace 2"})
        pair.sync = pair.cli("sync", "--quiet")
        yield pair


def sync_in_its_own_session(env: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`scanwatch sync --quiet` leading a session of its own, as a cron job's or a unit's command does, and the
    processes of that session still running the moment it has exited (none should be)."""
    # Output to files: a pipe's end of file would wait for every process holding it, the command's own exit not.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], env=env, cwd=ROOT,
                                stdout=out, stderr=err, text=True, start_new_session=True)
        proc.wait(timeout=600)
        left = _in_session(proc.pid)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read()), left


def _in_session(sid: int) -> list[str]:
    return [f"{entry.name}: {cmdline[:160]}" for entry, stat, cmdline in live_processes() if int(stat[3]) == sid]
