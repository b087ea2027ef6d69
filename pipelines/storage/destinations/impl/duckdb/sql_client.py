"""DuckDB's SQL client: the history file attached to this process's database, its settings, and the turns
writers of one process take on it."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from pipelines.core.history_location import HistoryLocation
from pipelines.snapshot.store import place_if_absent  # a whole file put in place, as the snapshot's parts are
from pipelines.storage.destinations.base import Connection, Engine

# A sync's memory is bounded by its merge group (see merge.CHUNK_BYTES), not by the history: DuckDB spills to
# `<db>.tmp` past this limit instead of growing with the workspace. 96 MB holds a merge group's stage tables
# and the snapshot's aggregates; the issue and scan tables carry no index that would have to fit in it as the
# history grows (migrations 011 and 022). One thread: scanwatch shares its host, and single-threaded DuckDB
# keeps one buffer set instead of one per thread. Insertion order is never relied on (every read that cares
# says ORDER BY), and keeping it costs memory in large loads.
MEMORY_LIMIT_MB = 96
SETTINGS = {"memory_limit": f"{MEMORY_LIMIT_MB}MB", "threads": 1, "preserve_insertion_order": False}


def configure(raw: duckdb.DuckDBPyConnection) -> None:
    for name, value in SETTINGS.items():
        raw.execute(f"SET {name} = '{value}'")


class Attached(Connection):
    """A history file attached to this process's one in-memory DuckDB for as long as a connection uses it.

    Each new DuckDB database costs tens of milliseconds to create and to close (its catalog of built-in
    functions), and a sync opens the history several times per step, so that a merge never holds the file
    while the step waits on the service. Attaching the file to a database kept for the process costs a
    fraction of that, and takes and releases DuckDB's file lock as a connection of its own would: the file is
    detached (checkpointed, its lock released) when its last connection of the process closes.
    """

    _host: duckdb.DuckDBPyConnection | None = None
    _host_pid = 0
    _files: dict[str, list[Any]] = {}  # resolved path -> [alias, connections open]
    _lock = threading.Lock()
    _count = 0
    _key = ""
    _closed = False

    @classmethod
    def open(cls, path: Path, engine: Engine) -> Attached:
        key = _key(path)
        with cls._lock:
            host = cls._host_here(path)
            entry = cls._files.get(key)
            if entry is None:
                cls._count += 1
                alias = f"history_{cls._count}"
                host.execute(f"ATTACH '{_quoted(str(path))}' AS {alias}")
                entry = cls._files[key] = [alias, 0]
            entry[1] += 1
        try:
            raw = host.cursor()
            raw.execute(f"USE {entry[0]}")
            raw.execute("SET TimeZone = 'UTC'")
        except BaseException:
            cls._release(key)
            raise
        conn = cls(raw, engine, HistoryLocation(str(path)))
        conn._key = key
        return conn

    @classmethod
    def _host_here(cls, first: Path) -> duckdb.DuckDBPyConnection:
        """The process's database; a forked child makes its own (the parent's is the parent's). Its spill
        folder is the first history's `<file>.tmp`, as that file's own database would have used."""
        if cls._host is None or cls._host_pid != os.getpid():
            host = duckdb.connect(":memory:")
            configure(host)
            host.execute(f"SET temp_directory = '{_quoted(str(first) + '.tmp')}'")
            cls._host, cls._host_pid, cls._files = host, os.getpid(), {}
        return cls._host

    @classmethod
    def _release(cls, key: str) -> None:
        with cls._lock:
            entry = cls._files.get(key)
            if entry is None:
                return
            entry[1] -= 1
        cls.detach_idle(key)

    @classmethod
    def detach_idle(cls, key: str) -> None:
        """Detach the file (checkpointed, its lock released) once no connection of the process uses it and
        no thread waits for a writer's turn on it (`file_writer`)."""
        with cls._lock:
            entry = cls._files.get(key)
            if entry is None or entry[1] > 0 or _WAITING.get(key):
                return
            del cls._files[key]
            if cls._host is not None:
                cls._host.execute(f"DETACH {entry[0]}")

    @classmethod
    def memory_by_tag(cls) -> dict[str, tuple[int, int]]:
        """What the process's DuckDB holds, by DuckDB's memory tag: bytes in memory and bytes spilled. The
        limit is one for the process, so only its database can say what the writer, a read beside it and a
        checkpoint hold together (benchmarks.duckdb_peak samples it during a sync)."""
        with cls._lock:
            host = cls._host if cls._host_pid == os.getpid() else None
            raw = host.cursor() if host is not None else None
        if raw is None:
            return {}
        try:
            rows = raw.execute("SELECT tag, memory_usage_bytes, temporary_storage_bytes FROM duckdb_memory() "
                               "WHERE memory_usage_bytes > 0 OR temporary_storage_bytes > 0").fetchall()
            return {str(tag): (int(used), int(spilled)) for tag, used, spilled in rows}
        finally:
            raw.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.raw.close()
        finally:
            self._release(self._key)


def create_whole(path: Path) -> None:
    """A history file that does not exist yet, made whole before any process can open it.

    DuckDB creates a database file empty, then writes its headers, and refuses an empty file for good ("exists,
    but it is not a valid DuckDB database file"). `make demo`, whose two workspaces' first runs start together
    with the Dagster daemon, once ended with both runs failing on that error and the file left empty (which
    opener left it so was not caught again). So the file is written under a name of its own and linked into
    place, which fails if another process's got there first: no opener can find it half made. An empty file
    that no process holds is such a leftover, and is replaced the same way; one a process holds is left to it."""
    try:
        if path.stat().st_size > 0:
            return
    except FileNotFoundError:
        pass
    fresh = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.new")
    try:
        try:
            duckdb.connect(str(fresh)).close()
        except duckdb.Error:  # a folder it cannot write: opening the history itself says so, naming it
            return
        if not path.exists():
            place_if_absent(fresh, path)  # another process's file got there first: it is the history
        else:
            _replace_if_abandoned(path, fresh)
    finally:
        fresh.unlink(missing_ok=True)


def _replace_if_abandoned(path: Path, fresh: Path) -> None:
    """`fresh` in place of the empty file at `path` unless a process holds DuckDB's lock on it (a creator
    that has not written it yet). This process attaches no empty file, so closing the descriptor here, which
    drops the process's locks on the file, drops none of DuckDB's."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return
    try:
        if os.fstat(fd).st_size > 0:
            return
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its creator is at work
            return
        os.replace(fresh, path)
    finally:
        os.close(fd)


def _quoted(text: str) -> str:
    return text.replace("'", "''")


_WRITERS: dict[str, threading.RLock] = {}
_WAITING: dict[str, int] = {}  # resolved path -> threads of this process waiting for their writer's turn
_WRITERS_LOCK = threading.Lock()
_HELD = threading.local()  # per thread: resolved path -> how deep this thread holds its turn


@functools.lru_cache(maxsize=256)  # asked at every turn and open: a path resolved once, not at each
def _key(path: str | Path) -> str:
    return str(Path(path).resolve()) if str(path) != ":memory:" else ":memory:"


def _held() -> dict[str, int]:
    held: dict[str, int] | None = getattr(_HELD, "depth", None)
    if held is None:
        held = _HELD.depth = {}
    return held


def _take(key: str) -> threading.RLock:
    with _WRITERS_LOCK:
        lock = _WRITERS.setdefault(key, threading.RLock())
        _WAITING[key] = _WAITING.get(key, 0) + 1
    try:
        lock.acquire()
    finally:
        with _WRITERS_LOCK:
            _WAITING[key] -= 1
    return lock


@contextmanager
def file_writer(path: str | Path) -> Iterator[None]:
    """DuckDB's file lock keeps other processes out, but connections of one process share the database, so
    threads of one process (several workspaces synced at once) take turns on a lock of their own too.

    While another thread of the process waits for its turn, the file stays attached when a writer closes it
    (`Attached._release`): it is handed over instead of checkpointed, detached and attached again, which cost
    about a tenth of an unchanged workspace's sync (nine turns a workspace). The file is released once no
    thread of the process waits, as before."""
    key = _key(path)
    lock = _take(key)
    held = _held()
    depth = held.get(key, 0)
    held[key] = depth + 1
    try:
        yield
    finally:
        held[key] = depth
        try:
            if depth == 0 and _WAITING.get(key):  # handed over, still attached: its cache is let go of
                _let_go_of_cache()
        finally:
            lock.release()
            Attached.detach_idle(key)  # a turn that ended without closing what it attached leaves nothing held


def writers_waiting(path: str | Path) -> int:
    """Threads of this process waiting for their turn on the file: whom a read beside the writer makes room
    for."""
    return _WAITING.get(_key(path), 0)


# One read of committed rows at a time beside the writer, with a memory share of its own: the process's
# database has one memory limit, and a read beside the writer that shared the writer's 96 MB ran a merge of a
# first sync of 1,000 workspaces out of it (docs/benchmarks.md). While a read runs beside, the limit is the
# writer's plus the reader's share; a read that still runs out of it is read again in its own turn.
READER_SHARE_MB = 48
_BESIDE = threading.Lock()


def _limit_mb(extra: int) -> None:
    _set_limit_mb(MEMORY_LIMIT_MB + extra)


def _set_limit_mb(mb: int) -> None:
    with Attached._lock:  # the process's database object is shared with the threads attaching and detaching
        if Attached._host is not None and Attached._host_pid == os.getpid():
            Attached._host.execute(f"SET memory_limit = '{mb}MB'")


# What DuckDB keeps of the history's blocks between two turns of a file handed over (several workspaces
# synced at once): a turn reads what its workspace needs, and an unchanged workspace needs little, but a cache
# kept up to the limit filled with every workspace's blocks as the file grew, so the process's memory grew with
# the number of workspaces (203 MiB at 10, 282 MiB at 1,000) though no turn needed more. Lowering the limit
# and raising it again is how DuckDB is told to evict (it evicts to meet a new limit); it is done only while no
# other query of the process can run: at the end of a turn, with no read beside it.
CACHE_KEPT_MB = 1


def _let_go_of_cache() -> None:
    if not _BESIDE.acquire(blocking=False):  # a read beside the writer runs: its blocks are in use
        return
    try:
        try:
            _set_limit_mb(CACHE_KEPT_MB)
        except duckdb.Error:  # what cannot be evicted (index entries not yet checkpointed) stays, under the
            return  # limit it had; DuckDB evicted the rest before it refused the new limit
        _limit_mb(0)  # raising the limit evicts nothing
    finally:
        _BESIDE.release()


@contextmanager
def beside_the_writer(path: str | Path) -> Iterator[bool]:
    """Hand this thread's turn on the file to the others for a read of committed rows, and take it back after.

    Yields whether the read runs beside the writer: only a thread that holds its turn once (not nested) while
    another thread waits for it lends it (alone, a read has no one to make room for), and only one such read
    of the process runs at a time. The thread's own connection stays open, so the file stays attached
    meanwhile; it must not be used until the block ends."""
    key = _key(path)
    held = _held()
    lock = _WRITERS.get(key)
    if key == ":memory:" or lock is None or held.get(key) != 1 or not writers_waiting(path) \
            or not _BESIDE.acquire(blocking=False):
        yield False
        return
    try:
        _limit_mb(READER_SHARE_MB)
    except BaseException:
        _BESIDE.release()
        raise
    held[key] = 0
    lock.release()
    try:
        yield True
    finally:
        try:
            # The writer's own limit again (DuckDB evicts what the read left to get there); one it cannot go back
            # to yet stays raised until the next read's end tries again.
            with contextlib.suppress(duckdb.Error):
                _limit_mb(0)
        finally:
            _BESIDE.release()  # before the turn is taken back: the next read need not wait for this one's turn
            _take(key)
            held[key] = 1
