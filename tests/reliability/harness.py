"""Shared machinery of the reliability suites: run a sync (in-process or as the real CLI), dump the
history in a comparable form, and tell a clean one-line failure from a traceback.

Comparisons are of the whole history, every table row by row, minus scanwatch's own observation times (when a
sync happened to see a row), which two runs of the same world can never share: `tests/history_dump.py`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from tests.history_dump import SNAPSHOT_TABLES, Dump, added, diff, dump_history, intact, lost, runs_added
from tests.reliability import forked
from tests.service_truth import Truth, expected_events, mismatches, recorded_events, walk

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "Dump", "Truth", "added", "assert_intact", "assert_one_line", "checked_sync", "cli", "diff", "dump",
           "intact", "lost", "query_rows", "runs_added", "service_env", "sync_env", "sync_in_process"]


def dump(db: Path) -> Dump:
    """The whole history of the DuckDB file `db` (tests/history_dump.py says what is compared and why)."""
    return dump_history(db)


def assert_intact(db: Path, before: Dump, *, may_add: tuple[str, ...] = ()) -> Dump:
    """The history in `db` still holds every row of `before`, changed in nothing (the snapshot, which a failed run
    rebuilds to show its failure, aside: `SNAPSHOT_TABLES`). A run that failed adds its
    failure record to `sync_runs`, and only that (a record of success there would mean a step got through);
    `may_add` names the tables a case expects to grow (a warning stored in `ingest_warnings`)."""
    after = dump(db)
    history = Dump({t: r for t, r in after.items() if t not in SNAPSHOT_TABLES}, columns=after.columns)
    problems = intact(history, Dump({t: r for t, r in before.items() if t not in SNAPSHOT_TABLES}),
                      may_add=("sync_runs", *may_add))
    assert not problems, problems
    succeeded = [r for r in runs_added(after, before) if r["status"] != "failure"]
    assert not succeeded, succeeded
    return after


def service_env(sim, db: Path, **extra: str) -> dict[str, str]:
    """The environment `scanwatch sync` and `scanwatch exporter` share, for a subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env.update({"SCANWATCH_BASE_URL": sim.base_url, "SCANWATCH_API_KEY": sim.api_key, "SCANWATCH_DB": str(db),
                "PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


def cli(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `scanwatch ARGS` as users do, from the repository root: a process of its own with `env`, forked
    once the libraries are imported (tests/reliability/forked.py)."""
    return forked.run(args, env, timeout=timeout, cwd=ROOT)


def assert_one_line(stderr: str, *, must_contain: str = "") -> str:
    """A failure the user can read: no traceback or stack trace (Python's or Dagster's), no framework log
    dump, and the reason on one `scanwatch ...:` line."""
    for noise in ("Traceback", "Stack Trace", " - dagster - ", "DagsterExecutionStepExecutionError"):
        assert noise not in stderr, stderr[-3000:]
    lines = [ln for ln in stderr.splitlines() if ln.startswith("scanwatch ")]
    assert len(lines) == 1, stderr[-2000:]
    assert must_contain in lines[0], lines[0]
    return lines[0]


@contextmanager
def sync_env(sim, db: Path, **extra: str) -> Iterator[None]:
    """os.environ pointed at one simulator and one history for an in-process sync, restored afterwards."""
    saved = dict(os.environ)
    os.environ.update(service_env(sim, db, **extra))
    for k in ("SCANWATCH_SNAPSHOT", "DAGSTER_HOME"):
        if k not in extra:
            os.environ.pop(k, None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def sync_in_process(sim, db: Path, **kw):
    """One `materialize_all()` (the code `scanwatch sync` runs) against `sim` into `db`."""
    from pipelines.commands.materialize import materialize_all

    with sync_env(sim, db):
        return materialize_all(**kw)


def checked_sync(sim, db: Path, previous: Truth | None = None, **kw) -> Truth:
    """A clean sync of `sim` into `db`, then the history held to what the service itself shows
    (tests/service_truth.py): every row and field an independent walk of the API sees, and exactly the events
    between `previous` (the walk after the last sync; None for a first sync) and now. The references of the
    fault, crash and concurrency suites are made by it, so "the same as a clean sync" means "right"."""
    ws = sim.world.main_workspace_id
    since = query_rows(db, "SELECT max(observed_at) FROM issue_events")[0][0] if Path(db).exists() else None
    outcome = sync_in_process(sim, db, **kw)
    assert outcome.success, outcome.error
    truth = walk(sim.base_url, sim.api_key)
    with duckdb.connect(str(db), read_only=True) as conn:
        problems = mismatches(conn, truth)
        got, want = recorded_events(conn, ws, since), expected_events(previous, truth)
    assert not problems, problems[:10]
    assert got == want, f"events only in the history: {list((got - want).items())[:5]}; " \
                        f"missing: {list((want - got).items())[:5]}"
    return truth


def query_rows(db: Path | str, sql: str, params: list | None = None) -> list[tuple]:
    """`sql` on the history (a DuckDB file, read-only, or a PostgreSQL URL), `?` for each parameter, in UTC."""
    from tests.backends import rows

    return rows(db, sql, params)
