"""The metrics snapshot kept in a PostgreSQL history: one row of `snapshot_parts` per workspace part.

With a PostgreSQL history the runs (pods on any node) and the exporter share no disk. A workspace's run
replaces its part's row in one statement, in its own transaction (`DatabaseStore.write`, on the run's
connection): a reader sees the old part or the new one, and a part that cannot be built keeps its last good
row, as a file of the folder store does. Every write takes a new `generation` from a sequence, the part's
identity in `SnapshotStore.keys`.

The exporter reads the rows through `PolledStore`, on a read-only connection of its own: a thread looks at
the generations every POLL_SECONDS and fetches only the parts whose generation moved, and `keys`/`read`
answer from what it last fetched. So a scrape never touches the database: it neither waits for a sync (an
MVCC read waits for no writer anyway, and a statement timeout bounds the rest) nor for a server that is down.
While the server cannot be read, `keys` says why (SnapshotError), the exporter keeps serving every part's last
good document with `secscan_snapshot_readable 0`, and the thread reconnects by itself.

Every wait on the server has a bound on this side too: libpq's connect timeout, TCP keepalives and
tcp_user_timeout (a dead path), the session's statement and lock timeouts (a slow or locked server), and a
watchdog for the case none of those sees: a peer frozen in place (SIGSTOP, a stalled middlebox) whose kernel
still ACKs everything, so the socket never fails and a server-side timeout is never heard. A look that has
not returned after STALL_SECONDS makes `keys` fail (every part unreadable), shuts the look's socket down so the
thread fails and connects again, and `problem()` says so for /-/healthy and /-/ready.

The database's password never leaves: libpq reads it from the URL, PGPASSWORD or .pgpass, and every message
built here shows the location masked and scrubs what the driver wrote. The statements live here rather than
under `sql/` because the exporter reads no file of the pipeline's; they are the store's own, in psycopg's
syntax. The engine hands the stores out (`PostgresEngine.snapshot_store` to a run, `polled_snapshot` to the
exporter), so the driver stays in this room and the snapshot contract imports none.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from pipelines.core.history_location import HistoryLocation
from pipelines.snapshot import format as fmt
from pipelines.storage.destinations.impl.postgres.errors import driver_reason

POLL_SECONDS = 2.0  # how soon the exporter sees a new part
CONNECT_TIMEOUT_SECONDS = 3  # unless the URL says otherwise (connect_timeout=...)
STATEMENT_TIMEOUT_MS = 2000  # a look or a fetch of parts; a lock (a migration) is waited for 1 s at most
LOCK_TIMEOUT_MS = 1000
# A look is two statements and maybe a connect: past this, it is stuck rather than slow.
STALL_SECONDS = 10.0
# libpq's parameters for a path that dies: keepalive probes after 5 s idle, every 2 s, 3 unanswered end the
# connection; data unacknowledged for 10 s does too.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
              "tcp_user_timeout": 10_000}

log = logging.getLogger("scanwatch.exporter")

_KEYS = "SELECT name, generation, octet_length(document) FROM snapshot_parts"
_READ = ("SELECT name, generation, document FROM snapshot_parts "
         "WHERE name = ANY(CAST(%(names)s AS VARCHAR[])) AND octet_length(document) <= %(cap)s")
_EMPTY = "SELECT count(*) = 0 FROM snapshot_parts"
_WRITE = ("INSERT INTO snapshot_parts (name, generation, written_at, document) "
          "VALUES (%(name)s, nextval('snapshot_part_generations'), now(), %(document)s) "
          "ON CONFLICT (name) DO UPDATE SET generation = excluded.generation, written_at = excluded.written_at, "
          "document = excluded.document")
_FILL = ("INSERT INTO snapshot_parts (name, generation, written_at, document) "
         "VALUES (%(name)s, nextval('snapshot_part_generations'), now(), %(document)s) "
         "ON CONFLICT (name) DO NOTHING")
_REMOVE = "DELETE FROM snapshot_parts WHERE name = %(name)s"

PartKey = tuple[int, int]  # (generation, size in bytes): a new key means a new part to read


class DatabaseStore:
    """Parts as rows of `snapshot_parts`, over a psycopg connection in autocommit mode (the run's own, or the
    exporter's read-only one)."""

    def __init__(self, conn: psycopg.Connection, location: HistoryLocation, milestone: object = None,
                 limits: fmt.Limits | None = None) -> None:
        self.conn = conn
        self.where = location
        self.milestone = milestone
        self.cap = limits.part_bytes if limits is not None else fmt.MAX_SNAPSHOT_BYTES  # what read_many fetches

    def __repr__(self) -> str:
        return f"DatabaseStore({self.where.masked!r})"

    def _run(self, work: Callable[[], Any]) -> Any:
        try:
            return work()
        except psycopg.Error as exc:
            raise fmt.SnapshotError(f"cannot reach the metrics snapshot in the PostgreSQL history at "
                                    f"{self.where.masked}: {driver_reason(exc, self.where)}") from None

    def keys(self) -> dict[str, PartKey]:
        return {name: (generation, size) for name, generation, size in
                self._run(lambda: self.conn.execute(_KEYS).fetchall())}

    def read_many(self, names: list[str]) -> dict[str, tuple[PartKey, bytes]]:
        """The parts named that are within the size cap, each with its identity; one statement."""
        rows = self._run(lambda: self.conn.execute(_READ, {"names": names, "cap": self.cap}).fetchall())
        return {name: ((generation, len(document.encode())), document.encode()) for name, generation, document in rows}

    def read(self, name: str, known: object | None = None) -> tuple[object, bytes | None]:
        keys = self.keys()
        if name not in keys:
            raise fmt.SnapshotError(f"no snapshot part {name!r} in {self.location(name)}")
        if keys[name] == known:
            return known, None
        return _fetched(self.read_many([name]), name, keys[name], self.location(name), self.cap)

    def needs_all(self) -> bool:
        return bool(self._run(lambda: self.conn.execute(_EMPTY).fetchone() == (True,)))

    def _transaction(self, work: Callable[[], object]) -> None:
        reached = self.milestone if callable(self.milestone) else (lambda _name: None)

        def inside() -> None:
            with self.conn.transaction():
                work()
                reached("snapshot.before_replace")

        self._run(inside)
        reached("snapshot.replaced")

    def write(self, name: str, data: bytes) -> None:
        self._transaction(lambda: self.conn.execute(_WRITE, {"name": name, "document": data.decode()}))

    def replace_all(self, parts: dict[str, bytes], own: str | None = None) -> None:
        """Every part in one transaction: `own` written, the others only where no row is (`SnapshotStore`
        says why). The table was empty when the build began, so no row is removed."""
        def every() -> None:
            for name, data in parts.items():
                self.conn.execute(_WRITE if name == own else _FILL, {"name": name, "document": data.decode()})

        self._transaction(every)

    def remove(self, name: str) -> None:
        self._run(lambda: self.conn.execute(_REMOVE, {"name": name}))

    def location(self, name: str) -> str:
        return f"{self.where.masked} (snapshot_parts, part {name!r})"


def _fetched(found: dict[str, tuple[PartKey, bytes]], name: str, key: PartKey, where: str,
             cap: int) -> tuple[PartKey, bytes]:
    if name not in found:  # over the cap (a key counts the bytes), or replaced by a larger one meanwhile
        raise fmt.SnapshotError(fmt.over_cap(where, key[1], cap))
    return found[name]


def connect_reader(location: HistoryLocation, *, connect_timeout: int = CONNECT_TIMEOUT_SECONDS) -> psycopg.Connection:
    """A read-only connection for the exporter: autocommit (each look is its own MVCC snapshot, and no
    transaction is ever left open), statement and lock timeouts, keepalives, the password left to libpq.
    What the URL sets itself (connect_timeout=..., keepalives_idle=...) wins."""
    given = psycopg.conninfo.conninfo_to_dict(location.url)
    options: dict[str, Any] = {"autocommit": True, "application_name": "scanwatch-exporter"}
    for name, value in {"connect_timeout": connect_timeout, **KEEPALIVES}.items():
        if name not in given:
            options[name] = value
    conn = psycopg.connect(location.url, **options)
    try:
        conn.execute("SET default_transaction_read_only = on")
        conn.execute(f"SET statement_timeout = {int(STATEMENT_TIMEOUT_MS)}")
        conn.execute(f"SET lock_timeout = {int(LOCK_TIMEOUT_MS)}")
    except BaseException:
        conn.close()
        raise
    return conn


class PolledStore:
    """The exporter's view of a PostgreSQL-kept snapshot: `keys` and `read` answer from the last look, which a
    thread of its own takes every `poll_seconds` (and at once, the first time `keys` is asked)."""

    def __init__(self, location: HistoryLocation, *, poll_seconds: float = POLL_SECONDS,
                 first_wait_seconds: float = CONNECT_TIMEOUT_SECONDS + STATEMENT_TIMEOUT_MS / 1000,
                 stall_seconds: float = STALL_SECONDS, limits: fmt.Limits | None = None) -> None:
        self.where = location
        self.poll_seconds = poll_seconds
        self.first_wait_seconds = first_wait_seconds
        self.stall_seconds = stall_seconds
        self.limits = limits or fmt.Limits()
        self._look_started: float | None = None  # monotonic start of the look under way
        self._unblocked: float | None = None  # the look whose socket the watchdog shut down
        self._lock = threading.Lock()
        self._parts: dict[str, tuple[PartKey, bytes | None]] = {}  # name -> (identity, bytes; None: over the cap)
        self._error: str | None = None
        self._looked = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._store: DatabaseStore | None = None
        self.looks = 0  # looks taken (each one a statement, two when a part moved)

    def __repr__(self) -> str:
        return f"PolledStore({self.where.masked!r})"

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="scanwatch-snapshot-poll", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.look()
            except Exception:  # never end the loop: a look that failed in an unforeseen way is tried again
                log.exception("the snapshot poll of the PostgreSQL history at %s failed; trying again",
                              self.where.masked)
                self._disconnect()
            self._stop.wait(self.poll_seconds)
        self._disconnect()

    def problem(self) -> str | None:
        """Why the poll cannot be trusted now (stopped, or stuck past its bound), or None: for the probes."""
        thread = self._thread
        if thread is not None and not thread.is_alive():
            return "the snapshot poll of the PostgreSQL history has stopped"
        started = self._look_started
        if started is not None and time.monotonic() - started > self.stall_seconds:
            return (f"the snapshot poll of the PostgreSQL history at {self.where.masked} has had no answer for "
                    f"{time.monotonic() - started:.0f} s")
        return None

    def _watchdog(self) -> str | None:
        """A look stuck past its bound: its socket is shut down (once), so the look fails and the loop connects
        again; the reason, stable while the look lasts (it is logged once)."""
        started = self._look_started
        if started is None or time.monotonic() - started <= self.stall_seconds:
            return None
        reason = (f"no answer from the PostgreSQL history at {self.where.masked} for the metrics snapshot within "
                  f"{self.stall_seconds:g} s (a silent network path or a stalled server): every part is served as "
                  "last read, unreadable, until it answers")
        store = self._store
        if self._unblocked != started:
            self._unblocked = started
            log.warning("%s", reason)
            with contextlib.suppress(OSError, psycopg.Error, ValueError, AttributeError):
                fd = store.conn.pgconn.socket  # type: ignore[union-attr]
                stuck = socket.socket(fileno=os.dup(fd))
                try:
                    stuck.shutdown(socket.SHUT_RDWR)
                finally:
                    stuck.close()
        return reason

    def _disconnect(self) -> None:
        if self._store is not None:
            with contextlib.suppress(psycopg.Error):
                self._store.conn.close()
            self._store = None

    def look(self) -> None:
        """One look: the generations, then the parts that moved; on failure the reason, the parts kept."""
        self._look_started = time.monotonic()
        try:
            if self._store is None:
                try:
                    conn = connect_reader(self.where)
                except psycopg.Error as exc:
                    raise fmt.SnapshotError(f"cannot reach the PostgreSQL history at {self.where.masked} for the "
                                            f"metrics snapshot: {driver_reason(exc, self.where)}") from None
                self._store = DatabaseStore(conn, self.where, limits=self.limits)
            keys = self._store.keys()
            with self._lock:
                held = dict(self._parts)
            moved = [name for name, key in keys.items()
                     if name not in held or held[name][0] != key or held[name][1] is None]
            # Only what fits is fetched: each part within the part cap, all of them within the total, the parts
            # held unchanged counted first (the source refuses the rest in its turn, with its line).
            used = sum(len(data) for name, (_key, data) in held.items()
                       if data is not None and name in keys and name not in moved)
            fetch = []
            for name in sorted(moved):
                size = keys[name][1]
                if size <= self.limits.part_bytes and used + size <= self.limits.total_bytes:
                    fetch.append(name)
                    used += size
            fetched = self._store.read_many(fetch) if fetch else {}
            parts = {}
            for name, key in keys.items():
                if name not in moved:
                    parts[name] = held[name]
                elif name in fetched:
                    parts[name] = fetched[name]
                elif name not in fetch:  # listed, too large to fetch now: said when read
                    parts[name] = (key, None)
                # else removed between the two statements: gone from this look
            with self._lock:
                self._parts, self._error = parts, None
        except fmt.SnapshotError as exc:
            self._disconnect()  # a server restarted or gone: the next look connects again
            with self._lock:
                self._error = str(exc)
        finally:
            self._look_started = None
            self.looks += 1
            self._looked.set()

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=10)
        else:
            self._disconnect()

    def keys(self) -> dict[str, PartKey]:
        self._start()
        if not self._looked.wait(self.first_wait_seconds):
            raise fmt.SnapshotError(f"no answer yet from the PostgreSQL history at {self.where.masked} for the "
                                    "metrics snapshot")
        stuck = self._watchdog()
        if stuck is not None:
            raise fmt.SnapshotError(stuck)
        with self._lock:
            if self._error is not None:
                raise fmt.SnapshotError(self._error)
            return {name: key for name, (key, _data) in self._parts.items()}

    def read(self, name: str, known: object | None = None) -> tuple[object, bytes | None]:
        with self._lock:
            held = self._parts.get(name)
        if held is None:
            raise fmt.SnapshotError(f"no snapshot part {name!r} in {self.location(name)}")
        key, data = held
        if key == known:
            return key, None
        if data is None:
            if key[1] <= self.limits.part_bytes:
                raise fmt.SnapshotError(f"snapshot part {self.location(name)} is {key[1]:,} bytes and does not fit "
                                        f"in the exporter's {self.limits.total_bytes:,}-byte total with the other "
                                        "parts (--max-total-bytes, SCANWATCH_EXPORTER_MAX_TOTAL_BYTES): it is not "
                                        "served")
            return _fetched({}, name, key, self.location(name), self.limits.part_bytes)
        return key, data

    def needs_all(self) -> bool:
        return not self.keys()

    def _refuse(self, *_args: object) -> None:
        raise fmt.SnapshotError("the exporter only reads the metrics snapshot: the runs write it")

    write = replace_all = remove = _refuse

    def location(self, name: str) -> str:
        return f"{self.where.masked} (snapshot_parts, part {name!r})"
