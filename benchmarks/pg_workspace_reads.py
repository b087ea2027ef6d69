"""`python -m benchmarks.pg_workspace_reads [--workspaces 50,200] [--tree DIR]`: what ONE workspace's sync reads
of a PostgreSQL history that holds N workspaces, statement by statement.

A workspace's run executes about 130 statements; one that reads every workspace's rows makes each run cost
grow with the number of workspaces, and a refresh of all of them O(N²). On a scratch PostgreSQL server
(tests/pg_server.py) started with `pg_stat_statements` and `auto_explain` preloaded, the simulator's N small
workspaces are followed: the first N-1 synced by one `scanwatch sync`, the history analysed (as autovacuum
would), then two measured runs, each a `scanwatch sync --workspace` process:

- the first sync of the last workspace (a workspace added to a full history);
- an unchanged re-sync of `ws1`.

During a measured run `auto_explain` logs every statement's plan with its actual rows (`log_analyze`, no
timing), and `pg_stat_statements` counts its calls, shared buffers and execution time. A statement's "rows
read" is, over every scan node of its plans, the rows the node produced plus those its filter removed, times
its loops: the tuples PostgreSQL touched. Statements are named by the `.sql` file they come from (matched on
their words) or their first words. Printed per N side by side, so a statement whose reads grow with N shows
as such; `grows` marks those reading 2x more at the largest N than at the smallest. Plans are logged with
instrumentation on, so the milliseconds are higher than in production: compare them with each other.
Writes `benchmarks/results/pg_workspace_reads.json`. Figures are reported, never asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.sim import SimProcess
from benchmarks.workspaces import workspaces_environment

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RAISED = 1_000_000
PRELOAD = (" -c shared_preload_libraries=pg_stat_statements,auto_explain -c pg_stat_statements.track=all"
           " -c pg_stat_statements.max=10000 -c log_line_prefix='%m [%p] ' -c autovacuum=off")
EXPLAIN = {"auto_explain.log_min_duration": "0", "auto_explain.log_analyze": "on", "auto_explain.log_buffers": "on",
           "auto_explain.log_timing": "off", "auto_explain.log_format": "json",
           "auto_explain.log_nested_statements": "on"}
_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.M)
_SCANS = ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan")


def _words(sql: str) -> tuple[str, ...]:
    from pipelines.storage.destinations.impl.postgres.sqltext import words

    try:
        return tuple(words(sql))
    except ValueError:
        return tuple(sql.lower().split())


def _file_statements(tree: Path) -> list[tuple[tuple[str, ...], str]]:
    """(words, `folder/file.sql` or `file.sql#k` for the k-th statement) for every statement of every SQL file."""
    from pipelines.storage.destinations.impl.postgres.sqltext import split

    found = []
    base = tree / "sql"
    for path in sorted(base.rglob("*.sql")):
        try:
            statements = split(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        name = str(path.relative_to(base))
        for k, statement in enumerate(statements):
            found.append((_words(statement.query), name + (f"#{k + 1}" if len(statements) > 1 else "")))
    return found


def _name(query: str, files: list[tuple[tuple[str, ...], str]], cache: dict[str, str]) -> str:
    """The file a statement comes from: the file statement sharing the longest run of leading words (slots
    such as a table's name make texts differ further on); else the statement's first words."""
    if query in cache:
        return cache[query]
    mine = _words(query)
    best, best_len = "", 0
    for theirs, name in files:
        n = 0
        for a, b in zip(mine, theirs, strict=False):
            if a != b:
                break
            n += 1
        if n == len(mine) == len(theirs):
            best, best_len = name, 10**9
            break
        if n > best_len:
            best, best_len = name, n
    if best_len < min(12, len(mine)):
        best = " ".join(query.split())[:70]
    cache[query] = best
    return best


def _rows_read(node: dict[str, Any]) -> int:
    """Tuples the scans of a plan touched: each scan's output and what its filter dropped, times its loops."""
    total = 0
    if node.get("Node Type") in _SCANS:
        loops = node.get("Actual Loops", 1) or 1
        total += int((node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
                      + node.get("Rows Removed by Index Recheck", 0)) * loops)
    for child in node.get("Plans", []):
        total += _rows_read(child)
    return total


def _seq_scans(node: dict[str, Any], out: set[str]) -> None:
    if node.get("Node Type") == "Seq Scan" and node.get("Relation Name"):
        out.add(node["Relation Name"])
    for child in node.get("Plans", []):
        _seq_scans(child, out)


def _plans(log: str) -> list[dict[str, Any]]:
    """The JSON plans `auto_explain` wrote in a stretch of the server's log."""
    found = []
    starts = [m.start() for m in _ENTRY.finditer(log)] + [len(log)]
    for a, b in itertools.pairwise(starts):
        entry = log[a:b]
        at = entry.find("plan:")
        if at < 0:
            continue
        body = entry[entry.find("{", at):]
        try:
            found.append(json.loads(body))
        except ValueError:
            continue
    return found


def _sync(env: dict[str, str], tree: Path, *extra: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sync", "--quiet", *extra],
                          env={**env, "PYTHONPATH": str(tree)}, cwd=tree, capture_output=True, text=True,
                          timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"scanwatch sync {' '.join(extra)} failed ({done.returncode}): "
                           f"{(done.stdout + done.stderr)[-1500:]}")
    return time.perf_counter() - started


def _measured(server: Any, name: str, env: dict[str, str], tree: Path, workspace: str,
              files: list[tuple[tuple[str, ...], str]]) -> dict[str, Any]:
    """One `scanwatch sync --workspace` with every plan logged; statements aggregated by file."""
    for key, value in EXPLAIN.items():
        server.psql(f'ALTER DATABASE "{name}" SET {key} = {value}')
    server.psql("SELECT pg_stat_statements_reset()")
    offset = server.log_file.stat().st_size
    seconds = _sync(env, tree, "--workspace", workspace)
    for key in EXPLAIN:
        server.psql(f'ALTER DATABASE "{name}" RESET {key}')
    time.sleep(0.5)
    with open(server.log_file, encoding="utf-8", errors="replace") as fh:
        fh.seek(offset)
        log = fh.read()
    cache: dict[str, str] = {}
    stats: dict[str, dict[str, Any]] = defaultdict(lambda: {"calls": 0, "rows_read": 0, "buffers": 0, "ms": 0.0,
                                                            "seq_scans": set()})
    for plan in _plans(log):
        top = plan.get("Plan", {})
        key = _name(plan.get("Query Text", ""), files, cache)
        stats[key]["rows_read"] += _rows_read(top)
        _seq_scans(top, stats[key]["seq_scans"])
    rows = server.psql(
        "SELECT row_to_json(s) FROM (SELECT calls, shared_blks_hit + shared_blks_read AS buffers, "
        "total_exec_time AS ms, query FROM pg_stat_statements "
        f"WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '{name}') AND toplevel) s").splitlines()
    for line in rows:
        row = json.loads(line)
        calls, buffers, ms = row["calls"], row["buffers"], row["ms"]
        key = _name(row["query"], files, cache)
        stats[key]["calls"] += int(calls)
        stats[key]["buffers"] += int(buffers)
        stats[key]["ms"] += float(ms)
    return {"seconds": round(seconds, 2),
            "statements": {k: {**v, "ms": round(v["ms"], 1), "seq_scans": sorted(v["seq_scans"])}
                           for k, v in stats.items()}}


def measure(count: int, trees: dict[str, Path]) -> dict[str, Any]:
    """N workspaces, the first N-1 synced once (by the first tree); then each tree measured on its own copy of
    that database, so every tree starts from the same history."""
    from tests.pg_server import PgServer

    first_tree = next(iter(trees.values()))
    server = PgServer.start()
    measured: dict[str, Any] = {}
    try:
        server.options += PRELOAD
        server.restart()
        server.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        base = server.create_database()
        with SimProcess(scale="small", seed=7, rate_limit=RAISED, workspaces=count) as sim, \
                tempfile.TemporaryDirectory(prefix="scanwatch-bench-wsreads-") as tmp:
            folder = Path(tmp)
            env = {**workspaces_environment(sim, count - 1, folder, server.url(base)),
                   "SCANWATCH_SNAPSHOT": str(folder / "snap")}
            bulk = _sync(env, first_tree)
            print(f"[bench] {count}: first sync of {count - 1} workspaces {bulk:.0f} s", file=sys.stderr, flush=True)
            server.psql("ANALYZE", base)
            sizes = dict(line.split("|") for line in server.psql(
                "SELECT relname, n_live_tup FROM pg_stat_user_tables WHERE n_live_tup > 0 ORDER BY relname",
                base).split())
            copies = {label: server.create_database(template=base) for label in trees}
            for label, tree in trees.items():
                files = _file_statements(tree)
                name = copies[label]
                env = {**workspaces_environment(sim, count, folder, server.url(name)),
                       "SCANWATCH_SNAPSHOT": str(folder / f"snap-{label}")}
                first = _measured(server, name, env, tree, f"ws{count}", files)
                print(f"[bench] {count} {label}: first sync of ws{count} {first['seconds']} s", file=sys.stderr,
                      flush=True)
                again = _measured(server, name, env, tree, "ws1", files)
                print(f"[bench] {count} {label}: unchanged re-sync of ws1 {again['seconds']} s", file=sys.stderr,
                      flush=True)
                measured[label] = {"tree": str(tree), "first_sync": first, "unchanged_resync": again}
    finally:
        server.stop()
    return {"workspaces": count, "table_rows": {k: int(v) for k, v in sizes.items()}, "trees": measured}


def table(columns: list[tuple[str, dict[str, Any]]], top: int = 40) -> list[str]:
    """Markdown rows: each statement's calls, rows read, buffers and ms in every column (a tree at an N), most
    rows read in the last column first; `grows` when the second column reads 2x the first (or the last the
    first of its tree at a larger N)."""
    names = {k for _, c in columns for k in c["statements"]}

    def cell(c: dict[str, Any], k: str, field: str) -> Any:
        return c["statements"].get(k, {}).get(field, 0)

    ordered = sorted(names, key=lambda k: -max(cell(c, k, "rows_read") for _, c in columns))
    labels = [label for label, _ in columns]
    head = ["statement", "calls"] + [f"rows read {x}" for x in labels] + [f"buffers {x}" for x in labels] \
        + [f"ms {x}" for x in labels] + ["seq scans (first column)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for k in ordered[:top]:
        scans = ", ".join(cell(columns[0][1], k, "seq_scans") or [])
        lines.append("| " + " | ".join([f"`{k}`", str(cell(columns[0][1], k, "calls"))]
                                       + [f"{cell(c, k, 'rows_read'):,}" for _, c in columns]
                                       + [f"{cell(c, k, 'buffers'):,}" for _, c in columns]
                                       + [str(cell(c, k, "ms")) for _, c in columns] + [scans]) + " |")
    totals = ["**all**", str(sum(cell(columns[0][1], k, "calls") for k in names))] \
        + [f"{sum(cell(c, k, 'rows_read') for k in names):,}" for _, c in columns] \
        + [f"{sum(cell(c, k, 'buffers') for k in names):,}" for _, c in columns] \
        + [str(round(sum(cell(c, k, 'ms') for k in names), 1)) for _, c in columns] + [""]
    lines.append("| " + " | ".join(totals) + " |")
    return lines


def _trees(specs: list[str]) -> dict[str, Path]:
    found = {}
    for spec in specs or [f"this={ROOT}"]:
        label, _, folder = spec.rpartition("=")
        found[label or Path(folder).name] = Path(folder).resolve()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", default="50,200", help="numbers of workspaces, comma-separated")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR",
                        help="a source tree whose scanwatch runs the syncs (repeat to compare trees on one history; "
                             "`git archive <commit> | tar -x -C DIR`); default this checkout")
    parser.add_argument("--top", type=int, default=40, help="statements listed per table")
    parser.add_argument("--out", type=Path, default=RESULTS / "pg_workspace_reads.json")
    args = parser.parse_args(argv)
    trees = _trees(args.tree)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    for n in args.workspaces.split(","):
        results.append(measure(int(n), trees))
        args.out.write_text(json.dumps(results, indent=2))  # each N as soon as it is measured
    for r in results:
        print(f"{r['workspaces']} workspaces: {r['table_rows'].get('issues', 0):,} issues, "
              f"{r['table_rows'].get('issue_events', 0):,} issue events before the measured runs")
        for label, t in r["trees"].items():
            print(f"  {label}: first sync of the last workspace {t['first_sync']['seconds']} s, unchanged re-sync "
                  f"of ws1 {t['unchanged_resync']['seconds']} s (wall, start-up and logged plans included)")
    for run, title in (("unchanged_resync", "unchanged re-sync of ws1"),
                       ("first_sync", "first sync of the last workspace")):
        print(f"\n{title}")
        columns = [(f"{label} @{r['workspaces']}", t[run]) for label in trees for r in results
                   for lab, t in r["trees"].items() if lab == label]
        print("\n".join(table(columns, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
