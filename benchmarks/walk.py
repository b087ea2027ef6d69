"""The walk of one sync: which of scanwatch's files a reader follows from the API call to `secscan_issues_open`.

    python -m benchmarks.walk [--root CHECKOUT] [--list]

Runs a first `scanwatch sync` against the simulator and then `scanwatch exporter` for one scrape, each under
a tracer, and prints three counts: the Python files of the checkout whose functions run (what a reader
follows), the files only imported on the way (their module bodies run, none of their functions), and the
`.sql` files opened. A module body, a class body, and the comprehensions and lambdas they evaluate are
import work; every other frame is a function running. A second sync of the same history is traced on its
own: the everyday walk, without the first sync's migrations and reconstruction. `--root` measures another
checkout with this one's interpreter, for a before/after comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# Runs inside each traced child: `python -c TRACER OUT ROOT -- scanwatch args`.
TRACER = r"""
import atexit, json, runpy, sys, threading
out, root = sys.argv[1], sys.argv[2]
sys.argv = ["scanwatch", *sys.argv[4:]]
ran, imported, opened = {}, {}, {}
OPTIMIZED = 0x1  # CO_OPTIMIZED: a function's frame; module and class bodies lack it
def import_work(frame):
    code = frame.f_code
    if not code.co_flags & OPTIMIZED:
        return True
    # a comprehension or lambda evaluated by a module or class body is that body's work
    back = frame.f_back
    return (code.co_name.startswith("<") and back is not None and back.f_code.co_filename == code.co_filename
            and not back.f_code.co_flags & OPTIMIZED)
def tracer(frame, event, arg):
    f = frame.f_code.co_filename
    if f.startswith(root) and "/.venv/" not in f:
        (imported if import_work(frame) else ran).setdefault(f, None)
    return None
def audit(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].endswith(".sql"):
        opened.setdefault(args[0], None)
sys.addaudithook(audit)
threading.settrace(tracer)
sys.settrace(tracer)
atexit.register(lambda: open(out, "w").write(json.dumps(
    {"ran": list(ran), "imported": list(imported), "sql": list(opened)})))
sys.path.insert(0, root)
try:
    runpy.run_module("pipelines.cli", run_name="__main__")
except KeyboardInterrupt:
    pass
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _traced(root: Path, args: list[str], out: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", TRACER, str(out), str(root), "--", *args], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _files(root: Path, parts: list[dict[str, list[str]]]) -> dict[str, list[str]]:
    rel = lambda p: str(Path(p).resolve().relative_to(root.resolve()))  # noqa: E731
    ran = sorted({rel(p) for part in parts for p in part["ran"]})
    imported = sorted({rel(p) for part in parts for p in part["imported"]} - set(ran))
    sql = sorted({rel(p) for part in parts for p in part["sql"]})
    return {"ran": ran, "imported": imported, "sql": sql}


def walk(root: Path) -> dict[str, dict[str, list[str]]]:
    """The first sync and a scrape, and then a second sync alone."""
    from simulator.testing import SimConfig, serve_simulator

    with tempfile.TemporaryDirectory() as tmp, serve_simulator(SimConfig(seed=7, scale="small",
                                                                             rate_limit=100000)) as sim:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
        env.update(SCANWATCH_BASE_URL=sim.base_url, SCANWATCH_API_KEY=sim.api_key,
                   SCANWATCH_DB=str(Path(tmp) / "h.duckdb"), PYTHONPATH=str(root))
        for name in ("sync", "resync"):
            sync = _traced(root, ["sync", "--quiet"], Path(tmp) / f"{name}.json", env)
            _, err = sync.communicate(timeout=600)
            if sync.returncode != 0:
                raise SystemExit(f"{name} failed: {err[-500:]}")
        port = _free_port()
        exporter = _traced(root, ["exporter", "--port", str(port)], Path(tmp) / "exporter.json", env)
        try:
            body = ""
            for _ in range(200):
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                    if "secscan_issues_open{" in body:
                        break
                except OSError:
                    pass
                time.sleep(0.1)
            if "secscan_issues_open{" not in body:
                raise SystemExit("the exporter never served secscan_issues_open")
        finally:
            exporter.send_signal(signal.SIGINT)
            exporter.wait(timeout=30)
        parts = {n: json.loads((Path(tmp) / f"{n}.json").read_text()) for n in ("sync", "exporter", "resync")}
    return {"first": _files(root, [parts["sync"], parts["exporter"]]), "resync": _files(root, [parts["resync"]])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout to measure (default: this one)")
    parser.add_argument("--list", action="store_true", help="print the files, not only their counts")
    args = parser.parse_args()
    walks = walk(args.root.resolve())
    print(f"walk of one sync to secscan_issues_open in {args.root}:")
    for name, title in (("first", "first sync + scrape"), ("resync", "second sync")):
        found = walks[name]
        print(f"  {title}: {len(found['ran'])} Python files run (+{len(found['imported'])} only imported), "
              f"{len(found['sql'])} SQL files opened")
    if args.list:
        for name, title in (("first", "first sync + scrape"), ("resync", "second sync")):
            for kind, what in (("ran", "run"), ("imported", "only imported"), ("sql", "SQL opened")):
                print(f"{title}, {what}:")
                print("\n".join(f"    {p}" for p in walks[name][kind]))


if __name__ == "__main__":
    main()
