"""A writer's connection kept for the same thread's next writer within a run, instead of a new one each time.

A workspace's run opens the history about nine times (each step, each merge, the snapshot), and each open
was a new server process: its start, its setup statements, and its catalogue caches filled again by the
first statements of each kind. On an unchanged workspace that was two thirds of the server's CPU. Inside
`keeping()` (a Dagster run holds it for its whole life: `HistoryResource`), a connection handed back whole (no
transaction open, not cut by a deadline, not lost) is kept by its thread, one at a time, and handed to that
thread's next writer of the same history, cleared first of what a session can leave behind (its temporary
tables, a session advisory lock a failure left held): the next writer finds it as a new one would be, its
settings (`sql_client.connect`) in place. When the block ends the kept connection is closed, so no process
holds a connection between its runs (a notebook, a code server, a database to drop or copy). A kept
connection unused for `IDLE_SECONDS` is closed instead of reused (a server or a proxy may have ended it).
A forked child never uses its parent's: both would speak on one socket.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.impl.postgres import deadline

IDLE_SECONDS = 30.0
# Run once each, when a connection is handed back: what a session keeps past its transactions.
CLEAR = ("DISCARD TEMP", "SELECT pg_advisory_unlock_all()")


class _Kept:
    def __init__(self, raw: psycopg.Connection, url: str) -> None:
        self.raw, self.url, self.since = raw, url, time.monotonic()


class _Scope(threading.local):
    depth = 0
    kept: _Kept | None = None


_scope = _Scope()
# A forked child's copies of its parent's kept connections: never used, never closed (closing would end the
# parent's session on the shared socket), held so that no garbage collection closes them either.
_inherited: list[Any] = []


@contextlib.contextmanager
def keeping() -> Iterator[None]:
    """Writers of this thread inside the block share one connection in turn; it is closed when the
    outermost block ends."""
    _scope.depth += 1
    try:
        yield
    finally:
        _scope.depth -= 1
        if _scope.depth == 0 and _scope.kept is not None:
            kept, _scope.kept = _scope.kept, None
            _close(kept.raw)


def take(location: HistoryLocation) -> psycopg.Connection | None:
    """This thread's kept connection to `location`, if it has one still fit to use, put under the deadlines
    armed now as a new connection would be."""
    kept, _scope.kept = _scope.kept, None
    if kept is None:
        return None
    if kept.url != location.url or time.monotonic() - kept.since > IDLE_SECONDS or not _idle(kept.raw) \
            or deadline.expired() is not None:
        _close(kept.raw)
        return None
    deadline.track(kept.raw)
    return kept.raw


def give_back(raw: psycopg.Connection, location: HistoryLocation) -> None:
    """Keep `raw` for this thread's next writer when inside `keeping()` and it can be reused, else close it."""
    keep = _scope.depth > 0 and _idle(raw)
    if keep:
        try:
            for statement in CLEAR:
                raw.execute(statement)
        except psycopg.Error:
            keep = False
    if not keep:
        _close(raw)
        return
    previous, _scope.kept = _scope.kept, _Kept(raw, location.url)
    if previous is not None:
        _close(previous.raw)


def _idle(raw: psycopg.Connection) -> bool:
    return not raw.closed and not raw.broken and raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def _close(raw: psycopg.Connection) -> None:
    with contextlib.suppress(Exception):
        raw.close()


def _forget_after_fork() -> None:
    if _scope.kept is not None:
        _inherited.append(_scope.kept.raw)
        _scope.kept = None


os.register_at_fork(after_in_child=_forget_after_fork)
