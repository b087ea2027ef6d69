"""`python -m benchmarks.refresh_ab --workspaces 1000 --refresh 200 --tree A --tree B [--rounds 3]`: an
unchanged refresh of part of a large DuckDB history, before and after a change, alternated.

A first sync of 1,000 workspaces takes a quarter of an hour, and runs of one tree differ by up to 15% on a
2-core machine (docs/benchmarks.md, "Where a thousand workspaces' refresh waits on DuckDB"): a change that
shortens the writer's turn by 10% cannot be told from the noise by one run of each tree. So the history is
built once (a first sync of N workspaces by the first tree, kept in `--cache` for the next call) and copied
before each run, and each round runs every tree in turn on its own copy: `scanwatch sync` of M of the N,
spread over the file. Every workspace costs its two requests: the scan schedule's peek is put off
(`SCANWATCH_SCANS_CRON` on the 29th of February), and a cached history whose projects were last read in
full too long ago (the issues asset's `full_reconcile_hours`) is read again first. Each run's wall, CPU and
peak RSS, and each tree's median, are printed; nothing is asserted.

`--tree DIR` is a source tree (`git worktree add DIR <commit>`, or `git archive <commit> | tar -x -C DIR`)
run with this checkout's interpreter, as `benchmarks.many_workspaces --tree` does. The history is written by
the first tree: every tree compared must read its schema (a tree older than the history's schema refuses it,
in one line).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.many_workspaces import RAISED, _environment, cli_sync
from benchmarks.sim import SimProcess

# The scan schedule's peek put off: an unchanged workspace is two requests. A schedule that came due since the
# history was built (a daily one, past midnight) peeks every workspace's scans, about six requests each; the
# 29th of February came last in 2024.
NEVER_DUE = "0 0 29 2 *"


def _followed(folder: Path, picks: list[int]) -> Path:
    """A workspaces file following the workspaces `picks` of the simulator's (`benchmarks.workspaces`'s names
    and key variables)."""
    lines = ["workspaces:"] + [line for n in picks for line in (f"  - name: ws{n}", f"    api_key_env: BENCH_KEY_{n}")]
    path = folder / "refreshed.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def spread(count: int, of: int) -> list[int]:
    """`count` workspace numbers (1-based) spread evenly over `of`: the file's early and late rows alike."""
    return list(range(1, of + 1)) if count >= of else [1 + (i * (of - 1)) // count for i in range(count)]


def reconciled_hours_ago(db: Path) -> float:
    """Hours since the history's least recent full read of a project's issues: past the issues asset's
    `full_reconcile_hours`, an unchanged refresh reads every project's issues again (about six requests a
    workspace instead of two)."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as conn:
        row = conn.execute("SELECT epoch(now()) - epoch(min(full_reconcile_at)) FROM project_sync_state").fetchone()
    return float(row[0] if row and row[0] is not None else 0.0) / 3600.0


def built_history(sim: SimProcess, workspaces: int, cache: Path, tree: Path) -> Path:
    """The folder in `cache` holding a history of the simulator's `workspaces`, each unchanged since its last
    sync: built by a first sync of `tree` on the first call, read in full again when its projects' last full
    read is too old for a refresh to find them unchanged."""
    from pipelines.defs.assets.issues import IssuesConfig

    built = cache / f"duckdb-{workspaces}"
    built.mkdir(parents=True, exist_ok=True)
    env = {**_environment(sim, workspaces, built, str(built / "history.duckdb")), "SCANWATCH_SCANS_CRON": NEVER_DUE}
    if not (built / "history.duckdb").exists():
        first = cli_sync(sim, workspaces, env, tree=tree)
        print(f"[bench] built {built} with a first sync of {workspaces}: {first}", file=sys.stderr, flush=True)
    elif reconciled_hours_ago(built / "history.duckdb") > IssuesConfig().full_reconcile_hours - 1:
        # An hour's margin for the rounds: each run must find its workspaces unchanged.
        caught_up = cli_sync(sim, workspaces, env, tree=tree)
        print(f"[bench] {built} was last read in full over {IssuesConfig().full_reconcile_hours - 1:.0f} h ago; "
              f"read again: {caught_up}", file=sys.stderr, flush=True)
    return built


def refreshing(sim: SimProcess, workspaces: int, refresh: int, built: Path, folder: Path) -> dict[str, str]:
    """The environment of a `scanwatch sync` of `refresh` of the `workspaces`, spread over the file, on a copy
    of the history in `built` made in `folder`."""
    shutil.copy(built / "history.duckdb", folder / "history.duckdb")
    shutil.copytree(built / "snapshot", folder / "snapshot")
    env = {**_environment(sim, workspaces, folder, str(folder / "history.duckdb")), "SCANWATCH_SCANS_CRON": NEVER_DUE}
    env["SCANWATCH_WORKSPACES_FILE"] = str(_followed(folder, spread(refresh, workspaces)))
    return env


def run(workspaces: int, refresh: int, trees: list[Path], rounds: int, cache: Path) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {str(tree): [] for tree in trees}
    with SimProcess(scale="small", seed=7, rate_limit=RAISED, workspaces=workspaces) as sim:
        built = built_history(sim, workspaces, cache, trees[0])
        for round_ in range(rounds):
            for tree in trees:
                with tempfile.TemporaryDirectory(prefix="scanwatch-bench-ab-") as tmp:
                    done = cli_sync(sim, refresh, refreshing(sim, workspaces, refresh, built, Path(tmp)), tree=tree)
                runs[str(tree)].append(done)
                print(f"[bench] round {round_ + 1}, {tree}: {done}", file=sys.stderr, flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=1000, help="workspaces the history holds")
    parser.add_argument("--refresh", type=int, default=200, help="workspaces refreshed by each run")
    parser.add_argument("--tree", type=Path, action="append", required=True,
                        help="a source tree to run (give two or more to compare)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tree, alternated")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "scanwatch-bench-ab",
                        help="where the history built by the first sync is kept between calls")
    args = parser.parse_args(argv)
    runs = run(args.workspaces, args.refresh, [t.resolve() for t in args.tree], args.rounds, args.cache)
    print(f"unchanged refresh of {args.refresh} of {args.workspaces} DuckDB workspaces, {args.rounds} rounds")
    print("tree | runs: wall (s) | median wall | median a workspace | median CPU a workspace | peak RSS | "
          "requests a workspace")
    for tree, done in runs.items():
        walls = [r["wall_s"] for r in done]
        print(f"{tree} | {', '.join(f'{w:.1f}' for w in walls)} | {statistics.median(walls):.1f} s | "
              f"{statistics.median(walls) / args.refresh:.3f} s | "
              f"{statistics.median(r['cpu_per_workspace_s'] for r in done):.3f} s | "
              f"{max(r['peak_rss_mib'] for r in done):.0f} MiB | "
              f"{statistics.median(r['requests_per_workspace'] for r in done)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
