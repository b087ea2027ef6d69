"""scanwatch's own errors for what a history's engine reports: callers catch these, never a driver's.

Each engine's `errors.py` turns its driver's exceptions (duckdb.Error, psycopg.Error) into these, with one line
the user can act on and no secret of the history's location in it.
"""

from __future__ import annotations

EXIT_ERROR = 1
EXIT_BUSY = 75  # EX_TEMPFAIL: the same command will work once the sync is done
EXIT_USAGE = 2


class HistoryError(RuntimeError):
    """Something the history's engine refused or could not do; the message is one line, secrets masked."""


class HistoryUnavailableError(HistoryError):
    """The history's server cannot be reached or used; the message says what to fix, its URL masked."""


class HistoryLockedError(HistoryError):
    """Another process holds the DuckDB file for writing (a sync or `dagster dev` run)."""


class HistoryQueryError(HistoryError):
    """A statement on the history failed; `line` is the driver's message as one line, secrets scrubbed."""

    def __init__(self, message: str, line: str) -> None:
        super().__init__(message)
        self.line = line


class ReadRefused(HistoryError):
    """A read through the read-only door that cannot run; the message is the whole output, no traceback, and
    `code` the exit status a command ends with (EXIT_BUSY: the same command will work later)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code

    @property
    def busy(self) -> bool:
        return self.code == EXIT_BUSY


class BackupFailed(HistoryError):
    """A backup or a restore that did not complete (nothing half-written is left); `code` the exit status."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def first_line(exc: BaseException) -> str:
    """A driver's message as one line: its first."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
