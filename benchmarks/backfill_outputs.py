"""`python -m benchmarks.backfill_outputs [--quick]`: each `backfill-prometheus` output (day-aligned blocks,
remote write into a real Prometheus with the receiver and an out-of-order window, the VictoriaMetrics import
against a stand-in that discards the bodies: its client side only) on the demo's two workspaces and, without
--quick, on the simulator's large workspace.

Each figure is measured in a fresh child process (its own peak RSS, `VmHWM`); promtool and the scratch
Prometheus are separate processes, reported apart. Figures are printed and written to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks.backfill import _vmhwm_mb

RESULTS = Path(__file__).resolve().parent / "results"
OUT_OF_ORDER = "global: {}\nstorage:\n  tsdb:\n    out_of_order_time_window: 800d\n"


def _child(output: str, db: str, url: str) -> dict:
    from pipelines.backfill.remote import RemoteWriteSink, VictoriaMetricsSink, query_base
    from pipelines.backfill.tsdb import Plan, backfill
    from pipelines.core.package_files import rule_files
    from pipelines.storage.db import connect

    conn = connect(db)
    rules = [p for p in rule_files() if "record:" in p.read_text()]
    with tempfile.TemporaryDirectory() as tmp:
        plan = Plan(data_dir=Path(tmp) / "data" if output == "blocks" else None,
                    labels={"job": "scanwatch", "instance": "localhost:9817"},
                    rule_files=[] if output == "victoriametrics" else rules)
        sink = {"blocks": lambda: None, "remote-write": lambda: RemoteWriteSink(url, query_base(url)),
                "victoriametrics": lambda: VictoriaMetricsSink(url, query_base(url))}[output]()
        started = time.monotonic()
        outcome = backfill(conn, plan, sink)
        seconds = time.monotonic() - started
    return {"seconds": round(seconds, 1), "samples": outcome.samples, "rule_samples": outcome.rule_samples,
            "series": len(outcome.series), "blocks": len(outcome.blocks), "peak_mb": _vmhwm_mb(),
            "tools_peak_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)}


def _measure(output: str, db: Path, url: str = "") -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.backfill_outputs", "--child", output, str(db), url],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _sync_demo(db: Path, tmp: Path) -> float:
    from simulator.testing import SimConfig, serve_simulator

    with serve_simulator(SimConfig(seed=7, scale="small", clock="driven", rate_limit=1_000_000,
                                   pro_workspaces=2)) as sim:
        (tmp / "workspaces.yml").write_text("workspaces:\n  - name: acme\n    api_key_env: SCANWATCH_KEY_ACME\n"
                                            "  - name: globex\n    api_key_env: SCANWATCH_KEY_GLOBEX\n")
        env = dict(os.environ, SCANWATCH_BASE_URL=sim.base_url, SCANWATCH_DB=str(db),
                   SCANWATCH_WORKSPACES_FILE=str(tmp / "workspaces.yml"),
                   SCANWATCH_KEY_ACME=sim.keys["pro"], SCANWATCH_KEY_GLOBEX=sim.keys["pro_2"])
        return _run_sync(env)


def _sync_large(db: Path) -> float:
    from simulator.testing import SimConfig, serve_simulator

    with serve_simulator(SimConfig(seed=7, scale="large", clock="driven", rate_limit=1_000_000)) as sim:
        env = dict(os.environ, SCANWATCH_BASE_URL=sim.base_url, SCANWATCH_API_KEY=sim.api_key, SCANWATCH_DB=str(db))
        env.pop("SCANWATCH_WORKSPACES_FILE", None)
        return _run_sync(env)


def _run_sync(env: dict[str, str]) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], env=env, check=True,
                   capture_output=True, text=True)
    return round(time.monotonic() - started, 1)


class _Discard(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(404 if self.path == "/metrics" else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.end_headers()


def _outputs(db: Path, tmp: Path) -> dict:
    from tests.backfill.prom_server import prometheus

    out = {"blocks": _measure("blocks", db)}
    with prometheus(tmp / "rw", tmp / "rw" / "data", "--web.enable-remote-write-receiver",
                    "--storage.tsdb.retention.time=3y", config=OUT_OF_ORDER) as prom:
        out["remote-write"] = _measure("remote-write", db, f"{prom.url}/api/v1/write")
        result = prom.get("/api/v1/query", query='{__name__=~"secscan.*"}[900d]')["result"]
        out["remote-write"]["read_back_samples"] = sum(len(s["values"]) for s in result)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out["victoriametrics"] = _measure(
            "victoriametrics", db, f"http://127.0.0.1:{server.server_address[1]}/api/v1/import/prometheus")
    finally:
        server.shutdown()
        server.server_close()
    return out


def run(quick: bool) -> dict:
    result: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        demo = Path(tmp) / "demo"
        demo.mkdir()
        result["demo"] = {"first_sync_seconds": _sync_demo(demo / "history.duckdb", demo)}
        result["demo"].update(_outputs(demo / "history.duckdb", demo))
        if not quick:
            large = Path(tmp) / "large"
            large.mkdir()
            result["large"] = {"first_sync_seconds": _sync_large(large / "history.duckdb")}
            result["large"].update(_outputs(large / "history.duckdb", large))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the demo's two workspaces only")
    parser.add_argument("--child", nargs=3, metavar=("OUTPUT", "DB", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        return 0
    result = run(args.quick)
    result["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "backfill-outputs.json").write_text(json.dumps(result, indent=2) + "\n")
    for world in ("demo", "large"):
        if world not in result:
            continue
        print(f"{world}: first sync {result[world]['first_sync_seconds']} s")
        for output in ("blocks", "remote-write", "victoriametrics"):
            f = result[world][output]
            extra = f", {f['blocks']} blocks" if output == "blocks" else ""
            extra += f", {f['read_back_samples']} read back" if "read_back_samples" in f else ""
            print(f"  {output}: {f['samples']} samples + {f['rule_samples']} rule samples of {f['series']} series in "
                  f"{f['seconds']} s, peak RSS {f['peak_mb']} MB (tools {f['tools_peak_mb']} MB){extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
