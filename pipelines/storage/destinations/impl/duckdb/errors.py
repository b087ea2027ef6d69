"""DuckDB's errors as scanwatch's own (`pipelines/storage/destinations/errors.py`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import duckdb

from pipelines.storage.destinations.errors import (
    EXIT_BUSY,
    HistoryLockedError,
    HistoryQueryError,
    ReadRefused,
    first_line,
)

T = TypeVar("T")
# Errors that mean another connection wrote the same thing first (DuckDB's optimistic transactions).
CONFLICTS = (duckdb.TransactionException,)
# The error of a statement naming a table the history does not have (yet).
MISSING_TABLE = (duckdb.CatalogException,)
_FIRST_POLL, _LAST_POLL = 0.05, 0.5  # seconds between a reader's tries: quick at first, gentle on a long wait


def waiting_for_writer(path: Path, wait_seconds: float, open_once: Callable[[], T]) -> T:
    """`open_once()`, again every 0.5 s while another process holds the file's lock, for up to `wait_seconds`;
    then one line saying who holds it."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return open_once()
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                raise HistoryLockedError(
                    f"the history {path} is being written by another process (a sync or a Dagster run); "
                    "wait for it to finish and try again"
                ) from None
            time.sleep(0.5)



def while_locked(db: Path, wait: float, attempt: Callable[[], T]) -> T:
    """`attempt()` (an open of the DuckDB file), tried again while a sync holds the file's lock, for up to
    `wait` seconds: DuckDB has no lock wait of its own (a locked file is an error at once). The one reader's
    wait of scanwatch: `scanwatch sql` and `scanwatch backup` both use it."""
    deadline = time.monotonic() + wait
    pause = _FIRST_POLL
    while True:
        try:
            return attempt()
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise ReadRefused(f"cannot open {db}: {first_line(exc)}") from None
            left = deadline - time.monotonic()
            if left <= 0:
                waited = f" for the {wait:g} s this command waited" if wait > 0 else ""
                raise ReadRefused(f"a sync is writing the history at {db}{waited}; try again in a moment, or "
                                  "give --wait more seconds", EXIT_BUSY) from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, _LAST_POLL)
        except duckdb.Error as exc:
            raise ReadRefused(f"cannot open {db}: {first_line(exc)}") from None


@contextlib.contextmanager
def mapped(where: str) -> Iterator[None]:
    """A DuckDB error inside the block as HistoryQueryError, naming the history."""
    try:
        yield
    except duckdb.Error as exc:
        line = first_line(exc)
        raise HistoryQueryError(f"the history at {where}: {line}", line) from None
