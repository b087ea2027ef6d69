"""A deadline this process keeps on its own database connections, for the wait nothing else ends.

A peer frozen in place (a SIGSTOPped proxy, a stalled middlebox) keeps the TCP connection open: its kernel
ACKs what is sent and answers keepalive probes, so libpq's keepalives and tcp_user_timeout never fire, and a
server-side statement_timeout is never heard. A sync on such a path would hang past any deadline, silent.
So a sync arms a `Deadline` for the time it has (`SCANWATCH_SYNC_DEADLINE_SECONDS`); every PostgreSQL
connection opened while it is armed is tracked by it (`track`, from `PostgresEngine.open`); when it expires,
each tracked connection's socket is shut down on this side, which ends any wait on it at once with a
connection error (the server rolls back what was open, as for any lost connection), and no new connection
is opened (`expired` answers why).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import Any

_lock = threading.Lock()
_armed: list[Deadline] = []
# After the sync's deadline, the service client has stopped on its own; this much later the history is cut.
GRACE_SECONDS = 2.0


def sync_reason(limit_seconds: float, where: str) -> str:
    """The one line of a sync whose history did not answer within its time."""
    return (f"ran out of its time (SCANWATCH_SYNC_DEADLINE_SECONDS, {limit_seconds:g} s) waiting for the PostgreSQL "
            f"history at {where}, which did not answer (a silent network path or a stalled server): what was being "
            "written is rolled back by the server; the next sync catches up")


class Deadline:
    def __init__(self, seconds: float, reason: str) -> None:
        self.reason = reason
        self.seconds = max(0.0, seconds)
        self.expired = False
        self._connections: weakref.WeakSet[Any] = weakref.WeakSet()
        self._timer = threading.Timer(max(0.0, seconds), self.expire)
        self._timer.daemon = True

    def expire(self) -> None:
        with _lock:
            self.expired = True
            connections = list(self._connections)
        for conn in connections:
            _shut(conn)

    def _track(self, conn: Any) -> None:
        self._connections.add(conn)


def _shut(conn: Any) -> None:
    """End every wait on a psycopg connection from another thread: its socket shut down, not closed (the fd
    stays the connection's own until it closes it)."""
    with contextlib.suppress(Exception):
        if conn.closed:
            return
        dup = socket.socket(fileno=os.dup(conn.pgconn.socket))
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()


@contextlib.contextmanager
def armed(seconds: float, reason: str) -> Iterator[Deadline]:
    """A deadline `seconds` from now over the connections opened inside the block; `reason` is the one line
    that says what ran out."""
    deadline = Deadline(seconds, reason)
    with _lock:
        _armed.append(deadline)
    deadline._timer.start()
    try:
        yield deadline
    finally:
        deadline._timer.cancel()
        with _lock:
            _armed.remove(deadline)


def expired() -> str | None:
    """Why no connection may be opened now (an armed deadline has passed), or None."""
    with _lock:
        return next((d.reason for d in _armed if d.expired), None)


def track(conn: Any) -> None:
    """Put a newly opened connection under every armed deadline (shut at once if one has already passed)."""
    with _lock:
        late = any(d.expired for d in _armed)
        for deadline in _armed:
            deadline._track(conn)
    if late:
        _shut(conn)
