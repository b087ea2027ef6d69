"""The whole history in a comparable form: every table and every column the catalog lists, minus the moments
at which scanwatch happened to look, for every "nothing lost" and "same history" claim of the suite.

Written against a DB-API style connection only (`conn.execute(sql).fetchall()`, `information_schema`, no
parameters, no engine function), so a DuckDB file and a PostgreSQL database synced from the same world can
be dumped by the same code and compared row for row. Tables and columns come from the catalog: a table or a
column added by a migration is compared from the day it exists, without an edit here.

What is left out, column by column, and why (anything not named here is compared as stored):

- `first_observed_at`, `last_observed_at`, `observed_at` (every table that has them), `sync_runs.started_at`
  and `.finished_at`, `reconstruction_runs.ran_at`, `scans_gone.gone_at`, `schema_migrations.applied_at`,
  `project_sync_state.issues_synced_at` / `.scans_synced_at` / `.full_reconcile_at`: scanwatch's own clock,
  when a sync saw, settled or recorded something. Two syncs of the same world never share them. The
  service's own times (`first_seen_at`, `fixed_at`, `last_scan_at`, `scans.finished_at`, `trial_ends_at`,
  `period_*`) are data and are kept.
- `projects.removed_at`, `targets.removed_at`, `issues.hidden_at`: scanwatch's clock too, but whether they are
  set is history (the service stopped listing the row), so they are compared as `IS NOT NULL`. The
  `project_sync_state` times above likewise keep whether they are set.
- `sync_runs.run_id`: a random identifier of the run. `sync_runs.requests`, `.retries`, `.rate_limited`,
  `.rate_limit_remaining`, `.rows_written` and `.service_version`: what a run cost and met, which depends on
  faults, on pacing and on how far an interrupted run got before it (a step with nothing left to read sends
  no request, so it saw no version; the service's version is compared in `accounts`), not on what the
  history holds. The rest of a run's record (workspace, asset, status, error, label) is compared.
- `scan_request_skips.tick`: the schedule's clock (or a manual run's id).
- `reconstruction_runs.first_observed_at`: when scanwatch first looked at the workspace (its clock).
- `project_owners.valid_from` (dropped) and `.valid_to` (compared as `IS NOT NULL`): the syncs that read an
  ownership map (its clock); whether a period has ended is history.

`workspace_id` is data: it is kept everywhere, so rows filed under the wrong workspace are a difference.

Tables whose rows every sync appends as a sample of the moment (`score_snapshots`, `quota_snapshots`,
`ingest_warnings`, `scan_request_skips`, `sync_runs`, `reconstruction_runs`) are compared as sets: once the
moment is dropped, the same values sampled again by one more sync (a sync killed after its projects step,
then run again) say only that scanwatch looked once more, which is its clock. Every other table, a new one
included, keeps every row, duplicates included (an `issue_events` row twice is an event recorded twice).
Left out whole: PostgreSQL's lock rows (`ENGINE_TABLES`) and the merge's shortcut (`SHORTCUT_TABLES`), which
are machinery, not history.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Columns dropped wherever they appear: when scanwatch looked.
CLOCK_COLUMNS = frozenset({"first_observed_at", "last_observed_at", "observed_at"})
# Per table: columns dropped (see the module docstring for each reason).
DROPPED: dict[str, frozenset[str]] = {
    "sync_runs": frozenset({"run_id", "started_at", "finished_at", "requests", "retries", "rate_limited",
                            "rate_limit_remaining", "rows_written", "service_version"}),
    "reconstruction_runs": frozenset({"ran_at"}),
    "scans_gone": frozenset({"gone_at"}),
    "schema_migrations": frozenset({"applied_at"}),
    "scan_request_skips": frozenset({"tick"}),
    "project_owners": frozenset({"valid_from"}),
}
# Columns compared only as "is it set": scanwatch's clock, whose presence is history.
PRESENCE: dict[str, frozenset[str]] = {
    "projects": frozenset({"removed_at"}),
    "targets": frozenset({"removed_at"}),
    "issues": frozenset({"hidden_at"}),
    "project_sync_state": frozenset({"issues_synced_at", "scans_synced_at", "full_reconcile_at"}),
    "project_owners": frozenset({"valid_to"}),
}
# Rows appended per sync as a sample of the moment: compared as sets.
SAMPLES = frozenset({"score_snapshots", "quota_snapshots", "ingest_warnings", "scan_request_skips", "sync_runs",
                     "reconstruction_runs"})
# The record of scanwatch's own runs: every run, failed ones too, adds to it by design.
RUN_RECORDS = frozenset({"sync_runs"})
# The metrics snapshot where PostgreSQL keeps it (DuckDB keeps a folder): built from the history by every run,
# a failed one too (to show its failure), and stamped with when; not history, so "intact" and comparisons
# across engines leave it out.
SNAPSHOT_TABLES = frozenset({"snapshot_parts"})
# PostgreSQL's own machinery, not history: the rows whose locks give a workspace's merges their turns.
ENGINE_TABLES = frozenset({"scanwatch_workspace_locks"})
# What lets a merge skip work, not history: digests of the last full merge of a list, one of them the engine's
# own row hash, and none left by a merge that warned. The history they stand for is compared; they are not
# (tests/ingest/test_unchanged_lists.py proves the shortcut leaves the history a full merge leaves).
SHORTCUT_TABLES = frozenset({"merged_lists"})

Row = tuple[Any, ...]


class Dump(dict[str, list[Row]]):
    """{table: sorted rows}; `columns` names each table's compared columns. Compares as a plain dict."""

    def __init__(self, *args: Any, columns: dict[str, tuple[str, ...]] | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.columns = dict(columns or {})

    def records(self, table: str, rows: Iterable[Row] | None = None) -> list[dict[str, Any]]:
        """Rows of `table` (or the given ones) as {column: value}."""
        names = self.columns[table]
        return [dict(zip(names, r, strict=True)) for r in (self[table] if rows is None else rows)]

CATALOG = """
SELECT c.table_name, c.column_name, c.data_type
FROM information_schema.columns AS c
JOIN information_schema.tables AS t
  ON t.table_catalog = c.table_catalog AND t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE t.table_type = 'BASE TABLE' AND t.table_schema = current_schema() AND t.table_catalog = current_database()
ORDER BY c.table_name, c.ordinal_position
"""


def catalog(conn: Any) -> dict[str, list[tuple[str, str]]]:
    """Every base table of the history's schema and its (column, type) pairs, in column order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, data_type in conn.execute(CATALOG).fetchall():
        out.setdefault(table, []).append((column, str(data_type).lower()))
    return out


def compared_columns(table: str, columns: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(column, type, how) for each column kept: how is "value" or "presence"."""
    out = []
    for column, data_type in columns:
        if column in CLOCK_COLUMNS or column in DROPPED.get(table, ()):
            continue
        out.append((column, data_type, "presence" if column in PRESENCE.get(table, ()) else "value"))
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _instant(value: Any) -> Any:
    return value.astimezone(UTC) if isinstance(value, datetime) and value.tzinfo is not None else value


def _json(value: Any) -> Any:
    parsed = json.loads(value) if isinstance(value, str | bytes) else value
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"))


def _normalizer(data_type: str) -> Any:
    """One spelling per value whichever engine stored it: instants in UTC, JSON as sorted text."""
    if "json" in data_type:
        return _json
    if "timestamp" in data_type:
        return _instant
    return None


def _order(row: Row) -> tuple:
    return tuple((v is None, "" if v is None else v) for v in row)


def _sorted(rows: list[Row]) -> list[Row]:
    try:
        return sorted(rows)
    except TypeError:  # a NULL met a value in the same column
        return sorted(rows, key=_order)


def dump(conn: Any) -> Dump:
    """The whole history behind `conn` (a DuckDB or PostgreSQL connection), comparable across runs and engines:
    {table: rows}, each row the compared columns in catalog order, rows sorted."""
    out = Dump()
    for table, columns in catalog(conn).items():
        kept = compared_columns(table, columns)
        if not kept or table in ENGINE_TABLES | SHORTCUT_TABLES:
            continue
        select = ", ".join(f"({_quote(c)} IS NOT NULL)" if how == "presence" else _quote(c) for c, _, how in kept)
        rows = conn.execute(f"SELECT {select} FROM {_quote(table)}").fetchall()
        fixes = [(i, f) for i, (_, t, how) in enumerate(kept) if how == "value" and (f := _normalizer(t))]
        if fixes:
            rows = [list(r) for r in rows]
            for r in rows:
                for i, f in fixes:
                    if r[i] is not None:
                        r[i] = f(r[i])
        rows = [tuple(r) for r in rows]
        if table in SAMPLES:
            rows = list(set(rows))
        out[table] = _sorted(rows)
        out.columns[table] = tuple(c for c, _, _ in kept)
    return out


@contextmanager
def open_history(target: str | Path) -> Iterator[Any]:
    """A read-only connection to a history: a DuckDB file, or a `postgresql://` database."""
    text = str(target)
    if text.startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(text) as conn:
            conn.read_only = True
            yield conn
        return
    import duckdb

    with duckdb.connect(text, read_only=True) as conn:
        yield conn


def dump_history(target: str | Path) -> Dump:
    """`dump()` of a history by its place; a DuckDB file not created yet is an empty history."""
    if not str(target).startswith(("postgresql://", "postgres://")) and not Path(target).exists():
        return Dump()
    with open_history(target) as conn:
        return dump(conn)


def _counted(rows: list[Row]) -> Counter:
    return Counter(rows)


def lost(after: Dump, before: Dump) -> dict[str, list[Row]]:
    """Rows of `before` that `after` no longer holds, per table (duplicates counted)."""
    out = {}
    for table, rows in before.items():
        missing = _counted(rows) - _counted(after.get(table, []))
        if missing:
            out[table] = _sorted(list(missing.elements()))
    return out


def added(after: Dump, before: Dump) -> dict[str, list[Row]]:
    """Rows `after` holds that `before` did not, per table (duplicates counted)."""
    return lost(before, after)


def diff(got: Dump, want: Dump, *, ignore: Iterable[str] = ()) -> dict[str, str]:
    """Per table, a short description of how two dumps differ; empty when they are the same history."""
    skip = set(ignore)
    out = {}
    for table in sorted((set(got) | set(want)) - skip):
        if got.get(table, []) == want.get(table, []):
            continue
        only_got = added(got, want).get(table, [])
        only_want = lost(got, want).get(table, [])
        out[table] = (f"{len(got.get(table, []))} rows vs {len(want.get(table, []))}; only here: "
                      f"{only_got[:2]}; missing: {only_want[:2]}")
    return out


def intact(after: Dump, before: Dump, *, may_add: Iterable[str] = RUN_RECORDS) -> dict[str, str]:
    """How `after` fails to be `before` with nothing lost: every row of `before` still there, and new rows only in
    the tables named (by default the record of the runs themselves, which a failed run adds to). Empty when
    the history is intact."""
    allowed = set(may_add)
    out = {t: f"lost {len(rows)} row(s): {rows[:2]}" for t, rows in lost(after, before).items()}
    for table, rows in added(after, before).items():
        if table not in allowed:
            out[table] = out.get(table, "") + f" gained {len(rows)} row(s): {rows[:2]}"
    return out


def runs_added(after: Dump, before: Dump) -> list[dict[str, Any]]:
    """The run records `after` holds beyond `before`, by column name."""
    return after.records("sync_runs", added(after, before).get("sync_runs", []))
