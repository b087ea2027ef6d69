"""A DuckDB file takes one writer at a time, and the threads of one process take turns on it. What only reads
committed rows (the metrics part, the checks, a step's look at what to read) takes no writer's turn: it
reads beside the writer, so the process's other core works while a merge holds the file.

What fails these: a read turned back into a writer's turn (the part's fourteen queries were most of an
unchanged workspace's SQL, all while the other threads waited), or a read that sees a writer's rows before
they are committed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pipelines.core.sqlfiles import read_sql
from pipelines.snapshot.format import TABLES
from pipelines.storage import beside_writer, writer
from pipelines.storage.destinations.base import Connection
from tests.ingest.conftest import run_sync

# Long enough for any machine; a read that waits for the writer waits until the writer lets go, which the
# test does only after this.
WAIT = 60.0


def test_a_read_beside_the_writer_sees_the_last_commit_while_a_merge_holds_the_file(env: Path) -> None:
    assert run_sync().success
    holding, done = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def merge_that_waits() -> None:
        try:
            with writer(env) as conn:
                conn.execute("BEGIN TRANSACTION")
                conn.execute("DELETE FROM sync_runs")
                holding.set()
                done.wait(WAIT)
                conn.execute("ROLLBACK")
        except BaseException as exc:  # reported by the test's thread
            failure.append(exc)
            holding.set()

    thread = threading.Thread(target=merge_that_waits)
    thread.start()
    try:
        assert holding.wait(WAIT) and not failure, failure
        read: list[int] = []

        def read_it() -> None:
            with beside_writer(env) as conn:
                read.append(conn.execute("SELECT count(*) FROM sync_runs").fetchall()[0][0])

        reader = threading.Thread(target=read_it)
        reader.start()
        reader.join(WAIT)
        assert read, "the read waited for the writer's turn"
        assert read[0] > 0, "the read saw the writer's uncommitted delete"
    finally:
        done.set()
        thread.join()
    assert not failure, failure


@contextmanager
def _turns_seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """Every statement the history runs, with whether its thread held a writer's turn then."""
    from pipelines.storage.destinations.impl.duckdb import factory

    held = threading.local()
    turns = factory.file_writer

    @contextmanager
    def writer_turn(path: Any) -> Iterator[None]:
        with turns(path):
            depth = getattr(held, "depth", 0)
            held.depth = depth + 1
            try:
                yield
            finally:
                held.depth = depth

    seen: list[tuple[str, bool]] = []
    execute = Connection.execute

    def spied(self: Connection, sql: str, params: Any = None) -> Any:
        seen.append((sql, getattr(held, "depth", 0) > 0))
        return execute(self, sql, params)

    monkeypatch.setattr(factory, "file_writer", writer_turn)
    monkeypatch.setattr(Connection, "execute", spied)
    yield seen


def test_the_part_and_the_checks_are_read_beside_the_writer(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_sync().success
    with _turns_seen(monkeypatch) as seen:
        outcome = run_sync()
    assert outcome.success
    reads = {read_sql(f"snapshot/{table}.sql"): f"the part's {table}" for table in TABLES}
    reads.update({read_sql(f"checks/{asset}.sql"): f"the checks of {asset}" for asset in ("issues", "scans")})
    reads[read_sql("sync/issue_projects.sql")] = "the issues step's choice of lists"
    reads[read_sql("sync/scan_projects.sql")] = "the scans step's choice of lists"
    ran = {sql for sql, _ in seen}
    assert set(reads) <= ran, [what for sql, what in reads.items() if sql not in ran]
    in_a_turn = sorted({reads[sql] for sql, turn in seen if sql in reads and turn})
    assert not in_a_turn, f"read in a writer's turn: {in_a_turn}"
    # The spy tells a turn when it sees one: each step's record of its run is a write.
    assert any(turn for sql, turn in seen if "INSERT INTO sync_runs" in sql)
