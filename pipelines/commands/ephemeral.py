"""The CLI's Dagster instance when no `DAGSTER_HOME` is set: Dagster's ephemeral one, on one SQLite connection
per storage.

Dagster's in-memory run and event storages open a new SQLite connection for every statement (a pool that
keeps none) and set two pragmas on it, for each of a run's 55 events and each read of them (docs/benchmarks.md,
"A thousand workspaces"). Each storage already holds one connection for its life, to keep its in-memory
database alive; here every statement goes through that one instead. The instance belongs to one thread (the
CLI gives each of its run threads its own), and a storage's statements take turns on its connection.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import dagster as dg
import sqlalchemy as db
from dagster._core.instance import InstanceType
from dagster._core.launcher.sync_in_memory_run_launcher import SyncInMemoryRunLauncher
from dagster._core.run_coordinator import DefaultRunCoordinator
from dagster._core.storage.event_log import InMemoryEventLogStorage
from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager
from dagster._core.storage.root import TemporaryLocalArtifactStorage
from dagster._core.storage.runs import InMemoryRunStorage
from sqlalchemy.pool import NullPool


class _Held:
    """One connection to a storage's in-memory database, lent to each statement of that storage in turn. A
    statement that asks again while one is under way (a storage method calling another) shares its
    transaction. Statements come from other threads too (a step's workers log), so the connection is one any
    thread may use, each waiting for its turn."""

    def __init__(self, engine: db.Engine) -> None:
        # Beside the storage's own held connection, which keeps the database alive, to the same database.
        self._engine = db.create_engine(engine.url, poolclass=NullPool, connect_args={"check_same_thread": False})
        self._conn = self._engine.connect()
        self._lock = threading.RLock()
        # Per connection, and outside a transaction: what Dagster's storages set on every new one.
        self._conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        self._conn.commit()

    def close(self) -> None:
        self._conn.close()
        self._engine.dispose()

    @contextmanager
    def lent(self) -> Iterator[db.Connection]:
        with self._lock:
            if self._conn.in_transaction():  # asked again by the statement under way, on its thread
                yield self._conn
                return
            with self._conn.begin():
                yield self._conn


class _RunStorage(InMemoryRunStorage):
    def __init__(self) -> None:
        super().__init__()
        self._held = _Held(self._engine)

    def dispose(self) -> None:
        self._held.close()
        super().dispose()

    @contextmanager
    def connect(self) -> Iterator[db.Connection]:
        with self._held.lent() as conn:
            yield conn


class _EventLogStorage(InMemoryEventLogStorage):
    """Also answers from memory what only this instance changes: a workspace's run asks whether its partition
    exists about 35 times, and reads the partition list again for each data version, each a statement; and
    whether a table exists, 54 times a run, each on a connection of its own."""

    def __init__(self) -> None:
        super().__init__()
        self._held = _Held(self._engine)
        self._tables: dict[str, bool] = {}
        self._partitions: dict[str, tuple[list[str], set[str]]] = {}

    @contextmanager
    def _connect(self) -> Iterator[db.Connection]:
        with self._held.lent() as conn:
            yield conn

    def dispose(self) -> None:
        self._held.close()
        super().dispose()  # type: ignore[no-untyped-call]

    def has_table(self, table_name: str) -> bool:
        if table_name not in self._tables:
            with self._held.lent() as conn:
                self._tables[table_name] = bool(self._engine.dialect.has_table(conn, table_name))
        return self._tables[table_name]

    def _known(self, partitions_def_name: str) -> tuple[list[str], set[str]]:
        if partitions_def_name not in self._partitions:
            keys = list(super().get_dynamic_partitions(partitions_def_name))
            self._partitions[partitions_def_name] = (keys, set(keys))
        return self._partitions[partitions_def_name]

    def get_dynamic_partitions(self, partitions_def_name: str) -> list[str]:
        return list(self._known(partitions_def_name)[0])

    def has_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> bool:
        return partition_key in self._known(partitions_def_name)[1]

    # Forgotten once written (a read from another thread in between would otherwise keep the list from before).
    def add_dynamic_partitions(self, partitions_def_name: str, partition_keys: Sequence[str]) -> None:
        try:
            super().add_dynamic_partitions(partitions_def_name, partition_keys)
        finally:
            self._partitions.pop(partitions_def_name, None)

    def delete_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> None:
        try:
            super().delete_dynamic_partition(partitions_def_name, partition_key)
        finally:
            self._partitions.pop(partitions_def_name, None)

    def wipe(self) -> None:
        try:
            super().wipe()
        finally:
            self._partitions.clear()


def ephemeral_instance(**settings: Any) -> dg.DagsterInstance:
    """What `DagsterInstance.ephemeral()` makes, its two SQL storages on their held connections."""
    return dg.DagsterInstance(
        instance_type=InstanceType.EPHEMERAL,
        local_artifact_storage=TemporaryLocalArtifactStorage(),  # type: ignore[no-untyped-call]
        run_storage=_RunStorage(),
        event_storage=_EventLogStorage(),
        compute_log_manager=NoOpComputeLogManager(),
        run_coordinator=DefaultRunCoordinator(),
        run_launcher=SyncInMemoryRunLauncher(),
        settings=settings or None,
    )
