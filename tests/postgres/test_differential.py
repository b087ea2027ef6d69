"""One world, two engines: the same simulator world synced into a DuckDB history and a PostgreSQL history
through several rounds of changes, and after each round every table and the metrics snapshot compared.

The syncs are `scanwatch sync`'s (every asset over HTTP, the first sync's reconstruction and the history
checks), one after the other against a driven clock, so both histories read the same world. The snapshot is
each history's own, as the snapshot asset wrote it: DuckDB's folder of parts, PostgreSQL's `snapshot_parts`
rows; it is also built again at one fixed instant so that every age and SLA state can be compared to the
second. What
scanwatch's own clock decides (when it looked, how long a run took, what it cost) is left aside, as
tests/history_dump.py leaves it aside in the tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipelines.snapshot.format import parse_snapshot
from pipelines.storage import connect
from simulator.testing import SimConfig, serve_simulator
from tests.backends import point_at
from tests.helpers import build_snapshot
from tests.history_dump import diff, dump_history

# Per snapshot table, the columns scanwatch's clock decides: when it looked, when its runs ended, what they
# cost and met (a sync's requests depend on pacing, its rate-limit headroom on the moment).
CLOCK: dict[str, frozenset[str]] = {
    "workspaces": frozenset({"last_observed_at", "last_success", "rate_limit_remaining"}),
    "quotas": frozenset({"observed_at"}),
    "pipeline": frozenset({"last_success", "last_run", "last_duration", "requests", "retries", "rate_limited",
                           "rows_written", "rate_limit_remaining"}),
    "critical_arrivals": frozenset({"arrived_at"}),
}
# Of a part's header: when it was built (a stored part's ages are measured against that moment too).
HEADER_CLOCK = frozenset({"generated_at", "generated_at_seconds"})
# What a stored part measures against its own build time; compared in the build at one fixed instant.
AGES = frozenset({"oldest_open_age", "sla_breached", "sla_due_soon"})
ROUNDS = 3


def comparable(doc: dict, *, stored: bool) -> dict:
    """A snapshot document without scanwatch's clock, its rows in one order whichever engine sorted them."""
    head = {k: v for k, v in doc.items() if k != "tables" and k not in HEADER_CLOCK}
    tables = {}
    for name, rows in doc["tables"].items():
        dropped = CLOCK.get(name, frozenset()) | (AGES if stored else frozenset())
        kept = [{k: v for k, v in row.items() if k not in dropped} for row in rows]
        tables[name] = sorted(kept, key=lambda r: json.dumps(r, sort_keys=True))
    return {**head, "tables": tables}


def stored_parts(duckdb_folder: Path, pg_url: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """Each history's stored parts, by name: DuckDB's files, PostgreSQL's rows."""
    files = {p.stem: parse_snapshot(p.read_bytes(), str(p)) for p in sorted(duckdb_folder.glob("*.json"))}
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = {name: parse_snapshot(document.encode(), name)
                for name, document in conn.execute("SELECT name, document FROM snapshot_parts").fetchall()}
    return files, rows


@pytest.fixture
def world() -> Iterator[Any]:
    with serve_simulator(SimConfig(seed=23, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        yield sim


def sync(world: Any, db: str, monkeypatch: pytest.MonkeyPatch, *, full_reconcile: bool) -> None:
    """`scanwatch sync` of `world` into the history `db`: every asset (the snapshot's and the first sync's
    reconstruction included) and the history checks; the snapshot goes to the history's own store."""
    from pipelines.commands.materialize import materialize_all

    point_at(monkeypatch, world, db)
    outcome = materialize_all(full_reconcile=full_reconcile)
    assert outcome.success and not outcome.failed_checks, (outcome.failed_step, outcome.error, outcome.failed_checks)


def differences(duck: str, pg: str, folder: Path, at: datetime) -> dict[str, Any]:
    found: dict[str, Any] = dict(diff(dump_history(pg), dump_history(duck), ignore=("snapshot_parts",)))
    files, rows = stored_parts(folder, pg)
    if sorted(files) != sorted(rows):
        found["stored parts"] = (sorted(files), sorted(rows))
    for name in set(files) & set(rows):
        if comparable(files[name], stored=True) != comparable(rows[name], stored=True):
            found[f"stored part {name}"] = "differs"
    built = []
    for db in (duck, pg):
        with connect(db) as conn:
            built.append(comparable(build_snapshot(conn, now=at), stored=False))
    for table in built[0]["tables"]:
        if built[0]["tables"][table] != built[1]["tables"][table]:
            only_duck = [r for r in built[0]["tables"][table] if r not in built[1]["tables"][table]][:2]
            only_pg = [r for r in built[1]["tables"][table] if r not in built[0]["tables"][table]][:2]
            found[f"snapshot {table}"] = f"DuckDB only: {only_duck}; PostgreSQL only: {only_pg}"
    return found


def run_rounds(world: Any, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, rounds: int) -> None:
    duck, folder = str(tmp_path / "history.duckdb"), tmp_path / "scanwatch-metrics.json"
    for n in range(rounds + 1):
        if n:
            world.run_round(1.0 if n % 2 else 0.5)  # new, fixed, reopened and re-severitied issues each round
            world.advance(3600)
        full = n == rounds  # the last round reads every project, as the periodic full reconcile does
        sync(world, duck, monkeypatch, full_reconcile=full)
        sync(world, pg_url, monkeypatch, full_reconcile=full)
        at = datetime.fromtimestamp(world.now(), UTC)
        assert differences(duck, pg_url, folder, at) == {}, f"round {n}"


def test_one_world_synced_into_both_engines_holds_the_same_history_and_snapshot(
        world, tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run_rounds(world, tmp_path, pg_database, monkeypatch, ROUNDS)
    with psycopg.connect(pg_database, autocommit=True) as conn:  # the rounds had something to compare
        issues, events = conn.execute("SELECT (SELECT count(*) FROM issues), (SELECT count(*) FROM issue_events)"
                                      ).fetchone()
        kinds = {e for (e,) in conn.execute("SELECT DISTINCT event FROM issue_events").fetchall()}
    assert issues > 0 and {"opened", "status_changed", "reopened", "severity_changed"} <= kinds, (issues, events, kinds)


@pytest.mark.slow
def test_a_medium_world_through_more_rounds(tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_simulator(SimConfig(seed=29, scale="medium", clock="driven", control=True, rate_limit=100000)) as sim:
        run_rounds(sim, tmp_path, pg_database, monkeypatch, 8)
