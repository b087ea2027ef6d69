"""`python -m benchmarks.hostile [--checkout DIR] [--level step|sync]`: what each hostile-service case costs.

For every case of `tests/hostile/service.py`, the code of ``--checkout`` (a scanwatch source tree; by default
this one) runs in its own process against the simulator behind the hostile proxy, from the same clean
history. ``--level sync`` runs `scanwatch sync --full-reconcile` as users do (Dagster's start-up included);
``--level step`` (the default) runs what the sync's steps do, without Dagster: the client reads the account,
the projects and the hit list of every project, and issue lists are merged into a copy of the history.
Printed per case: exit code, wall seconds (a case still running at ``--cap`` is killed: ``>cap``), peak RSS
of that process (its own VmHWM), requests the service received, whether a traceback was printed, whether
the earlier history is intact, and the last line of output. Run it against an older source tree
(`git archive <commit> | tar -x -C /tmp/old`) for the before/after table in `docs/hostile.md`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from benchmarks.syncing import measured_child
from simulator.testing import SimConfig, serve_simulator
from tests.hostile.service import gzip_bomb, serve_hostile
from tests.reliability.harness import dump, intact

ROOT = Path(__file__).resolve().parents[1]
# (name, hostile case, list it hits, needs a first sync rather than a re-sync)
CASES = [
    ("same page forever (issues)", "same_page", "issues", False),
    ("cursor cycle (projects)", "cycle", "projects", False),
    ("cursor cycle (scans, first sync)", "cycle", "scans", True),
    ("endless new ids (issues)", "endless", "issues", False),
    ("gzip bomb (issues)", "bomb", "issues", False),
    ("lone surrogate in one issue", "surrogate", "issues", False),
    ("40 MB field in one issue", "huge", "issues", False),
    ("body trickling 1 byte / 2 s (issues)", "trickle", "issues", False),
    ("rate-limit reset 10 days ahead", "far_reset", "issues", False),
    ("terminal escapes in names and values", "escapes", "issues", False),
]


def _env(checkout: Path, base_url: str, api_key: str, db: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env.update({"SCANWATCH_BASE_URL": base_url, "SCANWATCH_API_KEY": api_key, "SCANWATCH_DB": str(db),
                "PYTHONPATH": str(checkout)})
    return env


# The sync's steps without Dagster: account, projects, then the hit list of each project (issues merged).
STEP = """
import sys
from datetime import UTC, datetime
from pipelines.api import ScanningClient
from pipelines.storage import connect
from tests.helpers import merge_issues
kind, base, key, db = sys.argv[1:5]
try:
    with ScanningClient(base, key) as client:
        client.get_account()
        projects = client.list_projects()
        if kind == "scans":
            for p in projects:
                sum(1 for _ in client.iter_scans(p["id"]))
        elif kind == "issues":
            rows = [i for p in projects for i in client.list_issues(p["id"])]
            conn = connect(db)
            ws = conn.execute("SELECT workspace_id FROM accounts LIMIT 1").fetchall()[0][0]
            merge_issues(conn, ws, rows, now=datetime.now(UTC))
            conn.close()
    print("step: ok")
except Exception as exc:
    print("step:", type(exc).__name__, (str(exc).splitlines() or [""])[0][:300])
"""


def _sync(checkout: Path, env: dict[str, str], cap: float, level: str = "sync",
          kind: str = "issues") -> tuple[int, float, float, str]:
    cmd = [sys.executable, "-m", "pipelines.cli", "sync", "--full-reconcile"]
    if level == "step":
        cmd = [sys.executable, "-c", STEP, kind, env["SCANWATCH_BASE_URL"], env["SCANWATCH_API_KEY"],
               env["SCANWATCH_DB"]]
    cwd = os.getcwd()
    os.chdir(checkout)  # `python -m` imports `pipelines` from the working directory first
    try:
        return measured_child(cmd, env=env, timeout=cap)
    finally:
        os.chdir(cwd)


def _last_line(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.strip()]
    line = lines[-1] if lines else ""
    return line.encode("unicode_escape").decode("ascii")[:150]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile", description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="scanwatch source tree to measure")
    parser.add_argument("--cap", type=float, default=120.0, help="seconds before a case is killed")
    parser.add_argument("--level", choices=("step", "sync"), default="step", help="what runs (see above)")
    parser.add_argument("--bomb-mib", type=int, default=1024, help="unpacked size of the gzip bomb")
    parser.add_argument("--huge-mb", type=int, default=40, help="size of the one oversized field")
    parser.add_argument("--only", nargs="*", help="case names (the hostile case words) to run")
    args = parser.parse_args(argv)
    checkout = args.checkout.resolve()
    print(f"checkout {checkout}, level {args.level}, cap {args.cap:g} s, bomb {args.bomb_mib} MiB unpacked, "
          f"field {args.huge_mb} MB")
    with tempfile.TemporaryDirectory(prefix="scanwatch-hostile-") as tmp, \
            serve_simulator(SimConfig(seed=71, scale="small", clock="driven", control=True,
                                      rate_limit=100000)) as sim, serve_hostile(sim.base_url) as svc:
        svc.bomb = gzip_bomb(args.bomb_mib * 1024 * 1024)
        svc.huge_bytes = args.huge_mb * 1000 * 1000
        svc.trickle_gap = 2.0
        target = SimpleNamespace(base_url=svc.base_url, api_key=sim.api_key)
        clean = Path(tmp) / "clean.duckdb"
        code, *_ = _sync(checkout, _env(checkout, target.base_url, target.api_key, clean), 600)
        assert code == 0, "the clean sync failed"
        before = dump(clean)
        header = f"{'case':<40} {'exit':>5} {'seconds':>8} {'peak MB':>8} {'requests':>9} {'trace':>5} {'intact':>6}"
        print(header)
        print("-" * len(header))
        for name, case, kind, first in CASES:
            if args.only and case not in args.only:
                continue
            db = Path(tmp) / f"{case}-{kind}.duckdb"
            if not first:
                shutil.copy(clean, db)
            svc.set(case, kind)
            if first and args.level == "step":
                shutil.copy(clean, db)  # the step form merges only issues: it needs the account's row
            code, seconds, peak, out = _sync(checkout, _env(checkout, target.base_url, target.api_key, db),
                                             args.cap, args.level, kind)
            requests = svc.requests
            svc.set("clean")
            killed = seconds >= args.cap
            # Nothing lost or changed; a failed run may add its own failure record and stored warnings.
            lost_or_changed = intact(dump(db), before, may_add=("sync_runs", "ingest_warnings"))
            intact_cell = "-" if first else ("yes" if not lost_or_changed else "CHANGED")
            shown = f">{args.cap:g}" if killed else f"{seconds:.1f}"
            trace = "yes" if "Traceback" in out or "Stack Trace" in out else "no"
            print(f"{name:<40} {'kill' if killed else code:>5} {shown:>8} {peak:>8.0f} {requests:>9} {trace:>5} "
                  f"{intact_cell:>6}  {_last_line(out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
