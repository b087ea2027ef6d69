"""Shortcuts only tests and benchmarks take, kept out of the product.

The product always holds a history `Connection` (opened by `pipelines.storage.connect` or an engine),
streams a sync's issues through stage files (`merge_issue_stages`), and writes the metrics snapshot as one
part per workspace (`refresh_snapshot`). Tests also build small histories on a driver's own DuckDB
connection, merge issues held in memory, and write a whole snapshot as one file for the exporter to serve.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
from prometheus_client import CollectorRegistry

from exporters.app import registry_of
from exporters.collector import SecscanCollector
from exporters.source import Shard, SnapshotSource
from pipelines.core import milestones
from pipelines.snapshot.catalogue import CRITICAL_INFO_LIMIT, CRITICAL_NEW_LIMIT
from pipelines.snapshot.format import encode_snapshot, merge_documents
from pipelines.snapshot.store import SnapshotStore, write_file
from pipelines.storage.destinations import Connection
from pipelines.storage.destinations.impl import DUCKDB
from pipelines.storage.entities import ISSUE
from pipelines.storage.merge import MergeResult, merge_issue_stages, stage_format
from pipelines.storage.stage import StageFile
from pipelines.sync.snapshot import build_parts

if TYPE_CHECKING:
    from exporters.source import SnapshotState


def history(raw: duckdb.DuckDBPyConnection) -> Connection:
    """A driver's own DuckDB connection (a test's file, `:memory:`) as a history connection; closing the
    history closes it."""
    return Connection(raw, DUCKDB)


def merge_issues(conn: Connection, workspace_id: str, issues: Iterable[dict[str, Any]], *, now: datetime,
                 project_state: Sequence[tuple[str, str | None, bool]] = ()) -> MergeResult:
    """`merge_issue_stages` for issues held in memory: one stage file of them."""
    with StageFile(ISSUE.name, stage_format(conn, ISSUE)) as stage:
        return merge_issue_stages(conn, workspace_id, [stage.extend(issues).close()], now=now,
                                  project_state=project_state)


def build_snapshot(conn: Connection, *, now: datetime, sla_days: dict[str, int] | None = None,
                   critical_info_limit: int = CRITICAL_INFO_LIMIT,
                   critical_new_limit: int = CRITICAL_NEW_LIMIT) -> dict[str, Any]:
    """The whole history (every workspace's part) as one document, as `write_snapshot` writes it."""
    return merge_documents(list(build_parts(conn, now=now, sla_days=sla_days, critical_info_limit=critical_info_limit,
                                            critical_new_limit=critical_new_limit).values()))


def write_snapshot(snapshot: dict[str, Any], path: Path) -> None:
    """A whole document (`build_snapshot`) as one file, atomically: a single-file snapshot, which the exporter
    serves as it is."""
    write_file(Path(path), encode_snapshot(snapshot), milestones.reached)


def served(state: SnapshotState) -> dict[str, Any] | None:
    """Every part an exporter's source serves, as one document (a scrape serves the parts one by one)."""
    docs = [p.doc for p in state.parts.values() if p.doc is not None]
    return merge_documents(docs) if docs else None


@contextmanager
def served_snapshot(db: str | Path) -> Iterator[Path | SnapshotStore]:
    """The snapshot the exporter serves by default for the history `db`, found as `exporters/cli.py` finds it:
    the history's own store (polled) where the history keeps the snapshot, else the folder beside its file."""
    from pipelines.core.settings import Settings
    from pipelines.storage.destinations.impl import engine_for

    settings = Settings.load({"SCANWATCH_DB": str(db)})
    if not settings.snapshot_in_history:
        yield settings.paths.snapshot
        return
    store = engine_for(settings.history).polled_snapshot(settings.history)
    try:
        yield store
    finally:
        store.close()  # type: ignore[attr-defined]  # the polled store's thread


def build_registry(snapshot: Path | SnapshotStore, *, critical_info_limit: int = 0,
                   shard: Shard | None = None) -> CollectorRegistry:
    """The registry the exporter's /metrics serves for `snapshot` (scanwatch's series and the process
    metrics), for `generate_latest`."""
    return registry_of(SecscanCollector(SnapshotSource(snapshot, None, shard), critical_info_limit=critical_info_limit))
