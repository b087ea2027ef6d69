"""Ownership's cost on /metrics: series count and scrape size on the demo's world, without a map and with a
three-team map (docs/ownership.md).

`python -m benchmarks.ownership [--seed N]`: the demo's simulator (seed 1, scale small, two Pro workspaces),
one `scanwatch sync` of both, then `scanwatch exporter` scraped over HTTP; then the map is set (three teams,
one of them on a tier-1 SLA profile, a few projects left unowned), the same history synced again and scraped
again. Prints the series (sample lines), the scrape's bytes (plain text and gzip) and the project-level series
among them. Run it from an older checkout (PYTHONPATH=that tree) to measure the same before the `team` label.
The team label is one more label, not more series: the series counts are expected equal.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from simulator.testing import SimConfig, serve_simulator

ROOT = Path(__file__).resolve().parents[1]
WORKSPACES = """workspaces:
  - name: acme
    api_key_env: SCANWATCH_KEY_ACME
  - name: globex
    api_key_env: SCANWATCH_KEY_GLOBEX
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"scanwatch {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return done


def _scrape(env: dict[str, str]) -> bytes:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--port", str(port)], env=env,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the exporter did not become ready in 60 s") from None
                time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            return answer.read()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _figures(body: bytes) -> dict[str, int]:
    lines = [line for line in body.decode().splitlines() if line and not line.startswith("#")]
    return {"series": len(lines), "project_series": sum(1 for line in lines if 'project_id="' in line),
            "bytes": len(body), "gzip_bytes": len(gzip.compress(body)),
            "team_labels": sum(1 for line in lines if re.search(r'[{,]team="', line))}


def run(seed: int = 1) -> dict[str, dict[str, int]]:
    with tempfile.TemporaryDirectory(prefix="scanwatch-ownership-") as folder, \
            serve_simulator(SimConfig(seed=seed, scale="small", clock="driven", rate_limit=100000,
                                      pro_workspaces=2)) as sim:
        tmp = Path(folder)
        (tmp / "workspaces.yml").write_text(WORKSPACES)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_") and k != "DAGSTER_HOME"}
        env.update({"SCANWATCH_WORKSPACES_FILE": str(tmp / "workspaces.yml"), "SCANWATCH_BASE_URL": sim.base_url,
                    "SCANWATCH_KEY_ACME": sim.keys["pro"], "SCANWATCH_KEY_GLOBEX": sim.keys["pro_2"],
                    "SCANWATCH_DB": str(tmp / "history.duckdb"), "SCANWATCH_SNAPSHOT": str(tmp / "metrics.json")})
        _cli(env, "sync", "--quiet")
        results = {"no map": _figures(_scrape(env))}
        acme, globex = sim.project_ids("pro"), sim.project_ids("pro_2")
        (tmp / "ownership.yml").write_text(
            "sla_profiles:\n  tier1: {critical: 2, high: 7}\nteams:\n  payments: {sla_profile: tier1}\nrules:\n"
            f"  - team: payments\n    project_id: [{', '.join(acme[:len(acme) // 2])}]\n"
            f"  - team: platform\n    workspace: acme\n    project_id: [{', '.join(acme[len(acme) // 2:-1])}]\n"
            f"  - team: web\n    workspace: globex\n    project_id: [{', '.join(globex[:-1])}]\n")
        env["SCANWATCH_OWNERSHIP_FILE"] = str(tmp / "ownership.yml")
        _cli(env, "sync", "--quiet")
        results["three teams"] = _figures(_scrape(env))
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    results = run(args.seed)
    print(f"{'map':<12} {'series':>7} {'project series':>15} {'team labels':>12} {'bytes':>9} {'gzip bytes':>11}")
    for name, f in results.items():
        print(f"{name:<12} {f['series']:>7} {f['project_series']:>15} {f['team_labels']:>12} {f['bytes']:>9} "
              f"{f['gzip_bytes']:>11}")


if __name__ == "__main__":
    main()
