"""`python -m benchmarks.exporter_shards [--workspaces 1000] [--seed 4] [--shards 1,4] [--scrapes 60]`:
what a `/metrics` scrape costs at a thousand small workspaces, served by one exporter or split by `--shard`.

The parts are real: a `scanwatch sync` of `--seed` small simulator workspaces (3 projects each) on DuckDB
writes them; a real sync of a thousand workspaces takes most of an hour on this machine, so each real part is
then replicated under new workspace names (its `workspace` label on every row, its `workspace_id` and its file
name) until there are `--workspaces` of them. For each shard count N, N `scanwatch exporter --shard I/N`
processes serve the folder; each is scraped `--scrapes` times as Prometheus scrapes (OpenMetrics, gzip),
after one scrape that loads the parts. Per exporter: samples, bytes (plain and gzip), scrape time p50 and
p99, CPU per scrape, CPU until ready (start, reading the parts, the first encoding) and resident memory (now
and peak). The union of the shards' workspace series is checked against the unsharded count. `--tree DIR`
runs the exporters from another source tree (`git archive <commit> | tar -x -C DIR`), to measure before a
change; a tree without `--shard` is measured unsharded only.
Timings are reported, never asserted; JSON goes to benchmarks/results/exporter_shards.json.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.many_workspaces import RAISED
from benchmarks.scrape import _cpu_ms, _free_port, _rss_kib, _scrape
from benchmarks.sim import SimProcess
from benchmarks.workspaces import workspaces_environment
from pipelines.core.processes import stop_process

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PROMETHEUS = {"Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                        "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", "Accept-Encoding": "gzip"}


def real_parts(seed: int, folder: Path) -> list[dict]:
    """The parts one `scanwatch sync` of `seed` small simulator workspaces writes."""
    folder.mkdir(parents=True)
    with SimProcess(scale="small", seed=7, rate_limit=RAISED, workspaces=seed) as sim:
        env = {**workspaces_environment(sim, seed, folder, str(folder / "history.duckdb")),
               "SCANWATCH_SNAPSHOT": str(folder / "snapshot")}
        done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"sync failed: {done.stderr[-1500:]}")
    return [json.loads(p.read_bytes()) for p in sorted((folder / "snapshot").glob("*.json"))]


def replicate(parts: list[dict], count: int, folder: Path) -> int:
    """`count` parts in `folder`, the n-th a copy of real part n % len(parts) under workspace `bench-n`."""
    from pipelines.snapshot.format import encode_snapshot

    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for n in range(count):
        part = parts[n % len(parts)]
        label, ident = f"bench-{n:04d}", f"bench-id-{n:04d}"
        tables = {t: [{**r, "workspace": label} if "workspace" in r else r for r in rows]
                  for t, rows in part["tables"].items()}
        data = encode_snapshot({**part, "workspace": label, "workspace_id": ident, "tables": tables})
        (folder / f"{ident}.json").write_bytes(data)
        total += len(data)
    return total


def _get(port: int, headers: dict[str, str]) -> tuple[float, bytes]:
    return _scrape(port, headers, timeout=60)


def _answered(port: int, headers: dict[str, str], tries: int = 20) -> tuple[bytes | None, int]:
    """A body (None if none came), and how many scrapes the exporter dropped (its exchange deadline) first."""
    for dropped in range(tries):
        try:
            return _get(port, headers)[1], dropped
        except (OSError, http.client.HTTPException):
            continue
    return None, tries


def _samples(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def _wait_ready(port: int, proc: subprocess.Popen, timeout: float = 600) -> float:
    started = time.perf_counter()
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("GET", "/-/ready")
            if conn.getresponse().status == 200:
                return time.perf_counter() - started
        except OSError:
            pass
        if proc.poll() is not None or time.perf_counter() - started > timeout:
            raise RuntimeError("the exporter did not become ready")
        time.sleep(0.2)


def measure(folder: Path, shards: int, scrapes: int, tree: Path, tries: int = 20) -> dict:
    """Start `shards` exporters over `folder`, scrape each, and stop them."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_")}, "PYTHONPATH": str(tree)}
    procs = []
    try:
        for i in range(shards):
            port = _free_port()
            cmd = [sys.executable, "-m", "pipelines.cli", "exporter", "--snapshot", str(folder), "--listen-address",
                   "127.0.0.1", "--port", str(port), "--max-total-bytes", str(4 << 30)]
            if shards > 1:
                cmd += ["--shard", f"{i}/{shards}"]
            procs.append((port, subprocess.Popen(cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL)))
        rows, workspaces = [], set()
        for i, (port, proc) in enumerate(procs):
            ready_s = _wait_ready(port, proc)
            ready_cpu_s = _cpu_ms(proc.pid) / 1000  # start, reading the parts and the first encoding
            started = time.perf_counter()
            first, dropped = _answered(port, PROMETHEUS, tries)  # the first scrape may build what later ones reuse
            first_s = time.perf_counter() - started
            if first is None:  # every scrape cut at the exchange deadline: nothing to time
                rows.append({"shard": i, "ready_s": round(ready_s, 1), "answered": False, "scrapes_dropped": dropped,
                             "peak_rss_mib": round(_rss_kib(proc.pid)[1] / 1024, 1)})
                print(f"[bench] {shards} shard(s): {rows[-1]}", file=sys.stderr, flush=True)
                continue
            plain, cut = _answered(port, {"Accept-Encoding": "identity"})
            dropped += cut
            assert plain is not None
            text = plain.decode()
            lines = _samples(text)
            workspaces |= {line.split('workspace="', 1)[1].split('"', 1)[0] for line in lines
                           if 'workspace="' in line}
            cpu0 = _cpu_ms(proc.pid)
            times, zipped = [], 0
            for _ in range(scrapes):
                try:
                    seconds, body = _get(port, PROMETHEUS)
                except (OSError, http.client.HTTPException):  # cut at the exchange deadline
                    dropped += 1
                    continue
                times.append(seconds)
                zipped = len(body)
            cpu = (_cpu_ms(proc.pid) - cpu0) / scrapes
            if times:
                assert gzip.decompress(body).endswith(b"# EOF\n")
            rss, hwm = _rss_kib(proc.pid)
            ordered = sorted(times) or [float("nan")]
            rows.append({"shard": i, "ready_s": round(ready_s, 1), "ready_cpu_s": round(ready_cpu_s, 1),
                         "answered": True,
                         "first_scrape_s": round(first_s, 2), "scrapes_dropped": dropped,
                         "samples": len(lines), "bytes": len(plain), "gzip_bytes": zipped,
                         "p50_ms": round(statistics.median(ordered) * 1000, 1),
                         "p99_ms": round(ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1000, 1),
                         "cpu_ms_per_scrape": round(cpu, 1), "rss_mib": round(rss / 1024, 1),
                         "peak_rss_mib": round(hwm / 1024, 1)})
            print(f"[bench] {shards} shard(s): {rows[-1]}", file=sys.stderr, flush=True)
    finally:
        for _, proc in procs:
            stop_process(proc)
    return {"shards": shards, "tree": str(tree), "workspaces_served": len(workspaces), "exporters": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=4, help="small simulator workspaces synced for real")
    parser.add_argument("--shards", default="1,4", help="shard counts to measure, comma-separated")
    parser.add_argument("--scrapes", type=int, default=60)
    parser.add_argument("--tries", type=int, default=20, help="scrapes dropped before an exporter counts as silent")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose exporter is measured")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the exporters (the `finally`) when stopped
    with tempfile.TemporaryDirectory(prefix="scanwatch-bench-shards-") as tmp:
        parts = real_parts(args.seed, Path(tmp) / "sync")
        stored = replicate(parts, args.workspaces, Path(tmp) / "parts")
        print(f"[bench] {args.workspaces} parts from {len(parts)} real ones, {stored / 2**20:.1f} MiB",
              file=sys.stderr, flush=True)
        runs = [measure(Path(tmp) / "parts", int(n), args.scrapes, args.tree.resolve(), args.tries)
                for n in args.shards.split(",")]
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"workspaces": args.workspaces, "real_parts": len(parts), "part_bytes": stored, "runs": runs}
    (RESULTS / "exporter_shards.json").write_text(json.dumps(result, indent=2))
    print(f"{args.workspaces} small workspaces ({len(parts)} real parts replicated, {stored / 2**20:.1f} MiB of parts)")
    print("shards | exporter | samples | bytes | gzip bytes | p50 | p99 | CPU per scrape | CPU to ready | RSS / peak")
    for run in runs:
        for r in run["exporters"]:
            if not r.get("answered", True):
                print(f"{run['shards']} | {r['shard']} | no answer: {r['scrapes_dropped']} scrapes cut at the exchange "
                      f"deadline | peak RSS {r['peak_rss_mib']} MiB")
                continue
            print(f"{run['shards']} | {r['shard']} | {r['samples']:,} | {r['bytes']:,} | {r['gzip_bytes']:,} | "
                  f"{r['p50_ms']} ms | {r['p99_ms']} ms | {r['cpu_ms_per_scrape']} ms | {r['ready_cpu_s']} s | "
                  f"{r['rss_mib']} / {r['peak_rss_mib']} MiB")
        print(f"{run['shards']} | all | workspaces served: {run['workspaces_served']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
