"""psycopg's errors as scanwatch's own (`pipelines/storage/destinations/errors.py`): one line saying what
happened and what to do, the URL masked and the driver's text scrubbed of it."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import psycopg
from psycopg import errors

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.base import Connection
from pipelines.storage.destinations.errors import HistoryQueryError, HistoryUnavailableError
from pipelines.storage.destinations.impl.postgres import deadline

MISSING_TABLE = (errors.UndefinedTable,)
# A value that does not fit its cast (a plain cast of the typed staging).
DATA_ERROR = errors.DataError
LOCK_NOT_AVAILABLE = errors.LockNotAvailable


def message_lines(exc: BaseException) -> list[str]:
    """The driver's message as lines, without the server's position lines (`LINE 1: ...` and a bare `^`),
    which say nothing on a line of their own."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return [ln for ln in lines if not ln.startswith("LINE ") and set(ln) != {"^"}]


def driver_reason(exc: BaseException, location: HistoryLocation) -> str:
    """The driver's message, its last meaningful line (libpq puts the cause last), without secrets."""
    lines = message_lines(exc)
    text = lines[-1] if lines else type(exc).__name__
    text = re.sub(r'^(connection failed: |connection to server (?:at|on socket) .*? failed: |FATAL:\s+|ERROR:\s+)+',
                  "", text)
    return location.scrub(text)


# libpq's and the server's words for a server that cannot be reached at all (not one that answered "no").
_UNREACHABLE = ("connection refused", "could not connect", "timeout expired", "could not translate",
                "no route to host", "network is unreachable", "server closed the connection",
                "the database system is starting up", "the database system is shutting down",
                "name or service not known", "failed to resolve host", "no such file or directory")


def describe_failure(exc: BaseException, location: HistoryLocation) -> str:
    """One line for a failed connection: what happened and what to do, the URL masked. The server's answer is
    matched first: libpq's framing ("connection to server at ... failed") is around every one of them."""
    where = location.masked
    reason = driver_reason(exc, location)
    low = str(exc).lower()
    if "password authentication failed" in low or "no password supplied" in low:
        return (f"the PostgreSQL server refused the password for the history at {where} ({reason}): give it in "
                "SCANWATCH_DB, PGPASSWORD or ~/.pgpass")
    if re.search(r'database ".*" does not exist', low):
        return (f"the PostgreSQL server has no such database for the history at {where} ({reason}): create it "
                "(createdb), or fix the database name in SCANWATCH_DB")
    if re.search(r'role ".*" does not exist', low):
        return f"the PostgreSQL server has no such role for the history at {where} ({reason}): fix SCANWATCH_DB"
    if re.search(r'role ".*" is not permitted to log in', low):
        return (f"the role of the history at {where} may not log in ({reason}): give it LOGIN (ALTER ROLE ... "
                "LOGIN) or name another role in SCANWATCH_DB")
    if any(s in low for s in _UNREACHABLE):
        return (f"cannot reach the PostgreSQL server of the history at {where} ({reason}): check that it runs and "
                "that the host and port in SCANWATCH_DB are right")
    return f"cannot open the PostgreSQL history at {where}: {reason}"


@contextlib.contextmanager
def lost_server(conn: Connection) -> Iterator[None]:
    """A connection the server dropped (a restart, a failover, a network cut) is one line: the server has
    rolled back the open transaction, so nothing of it is half-written."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raw = conn.raw
        if (cut := deadline.expired()) is not None:  # this side ended the wait: the deadline is the cause
            raise HistoryUnavailableError(cut) from None
        if raw.closed or raw.broken or isinstance(exc, (errors.AdminShutdown, errors.CrashShutdown,
                                                             errors.CannotConnectNow)):
            raise HistoryUnavailableError(
                f"lost the PostgreSQL server of the history at {conn.label} ({driver_reason(exc, conn.location)}): "
                "what this step was writing was rolled back; the next sync catches up") from None
        raise




@contextlib.contextmanager
def mapped(location: HistoryLocation, doing: str) -> Iterator[None]:
    """Any driver error inside the block as HistoryQueryError: `doing` and the server's line, scrubbed."""
    try:
        yield
    except psycopg.Error as exc:
        line = first_line(exc, location)
        raise HistoryQueryError(f"{doing}: {line}", line) from None


def first_line(exc: BaseException, location: HistoryLocation) -> str:
    """The server's message without its position lines (`LINE 1: ...` and a bare `^`), secrets scrubbed."""
    lines = message_lines(exc)
    return location.scrub(lines[0] if lines else type(exc).__name__)
