"""One workspace's sync in a PostgreSQL database shared with many others, without and with the indexes on
`workspace_id` (migration 015).

`python -m benchmarks.pg_shared [--copies 49] [--scale medium]`. On a scratch PostgreSQL 15 server
(tests/pg_server.py), one workspace of the world is synced with `scanwatch sync` (the rate limit out of the
way); then its rows in the tables a sync reads by workspace are copied `--copies` times under other
workspace ids (every id suffixed, so keys stay unique), standing in for the other workspaces of one
deployment, and the database analysed. Then, with the migration's indexes dropped, and again with them made
as migration 015 makes them: three unchanged re-syncs and two full reconciles of the real workspace, each a
`scanwatch sync` process, its wall from start to exit (Python's start included). The first re-sync after
the copies is the first to read their freshly written rows: it is reported, and left out of the median.

Prints the walls and writes `benchmarks/results/pg_shared.json`. Never asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.sim import SimProcess
from benchmarks.syncing import measured_child

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RAISED = 1_000_000
COPIED = ("projects", "targets", "scans", "issues", "issue_events", "score_snapshots", "quota_snapshots",
          "project_sync_state", "scans_gone")
MIGRATION = ROOT / "sql" / "engines" / "postgres" / "migrations" / "015_workspace_indexes.sql"


def _sync(sim: SimProcess, db: str, full: bool = False) -> float:
    cmd = [sys.executable, "-m", "pipelines.cli", "sync", "--quiet", *(["--full-reconcile"] if full else [])]
    env = sim.env(db)
    env["SCANWATCH_SNAPSHOT"] = str(Path(tempfile.mkdtemp(prefix="bench-shared-")) / "metrics.json")
    code, seconds, _, out = measured_child(cmd, env=env, timeout=1800)
    if code != 0:
        raise RuntimeError(f"scanwatch sync failed: {out[-2000:]}")
    print(f"[bench]   sync{' --full-reconcile' if full else ''}: {seconds:.2f} s", file=sys.stderr, flush=True)
    return round(seconds, 2)


def _copy(server, name: str, table: str, copies: int) -> None:
    """The table's rows `copies` more times, every id-like text column (and the workspace) suffixed `-n`."""
    columns = server.psql(
        "SELECT string_agg(column_name || ':' || data_type, ',' ORDER BY ordinal_position) "
        f"FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '{table}'",
        name).strip().split(",")
    names, values = [], []
    for column in columns:
        col, kind = column.split(":", 1)
        quoted = f'"{col}"'
        names.append(quoted)
        textual = kind.startswith("character") or kind == "text"
        values.append(f"{quoted} || '-' || n" if textual and (col == "id" or col.endswith("_id")) else quoted)
    server.psql(f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(values)} "
                f"FROM {table}, generate_series(1, {copies}) n", name)


def measure(copies: int, scale: str) -> dict:
    from tests.pg_server import PgServer

    server = PgServer.start(Path(tempfile.mkdtemp(prefix="bench-pg-shared-")))
    try:
        with SimProcess(scale=scale, rate_limit=RAISED) as sim:
            name = server.create_database()
            db = server.url(name)
            first = _sync(sim, db)
            for table in COPIED:
                _copy(server, name, table, copies)
            server.psql("ANALYZE", name)
            issues, workspaces = server.psql("SELECT count(*), count(DISTINCT workspace_id) FROM issues",
                                             name).strip().split("|")
            indexes = re.findall(r"CREATE INDEX IF NOT EXISTS (\w+)", MIGRATION.read_text())
            phases = {}
            for phase in ("without", "with"):
                if phase == "without":
                    for index in indexes:
                        server.psql(f"DROP INDEX {index}", name)
                else:
                    server.psql("\n".join(line for line in MIGRATION.read_text().splitlines()
                                          if not line.startswith("--")), name)
                server.psql("ANALYZE", name)
                print(f"[bench] {phase} the indexes", file=sys.stderr, flush=True)
                unchanged = [_sync(sim, db) for _ in range(3)]
                full = [_sync(sim, db, full=True) for _ in range(2)]
                phases[phase] = {"unchanged": unchanged, "full_reconcile": full}
    finally:
        server.stop()
    return {"benchmark": "pg_shared", "scale": scale, "copies": copies, "issues": int(issues),
            "workspaces": int(workspaces), "first_sync_alone": first, "phases": phases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=49)
    parser.add_argument("--scale", default="medium")
    args = parser.parse_args(argv)
    result = measure(args.copies, args.scale)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pg_shared.json").write_text(json.dumps(result, indent=2))
    print(f"{result['issues']:,} issues of {result['workspaces']} workspaces in one database; "
          f"the real workspace's first sync alone {result['first_sync_alone']} s")
    print("indexes | unchanged re-syncs (the first reads the fresh copies) | full reconciles | "
          "median of the later re-syncs")
    for phase, r in result["phases"].items():
        print(f"{phase} | {r['unchanged']} | {r['full_reconcile']} | {statistics.median(r['unchanged'][1:])} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
