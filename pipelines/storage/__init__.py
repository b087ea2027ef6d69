"""The history (DuckDB or PostgreSQL): schema migrations, staging and set-based merges.

Python only moves pages into a staging table; every comparison, upsert and event is computed by the database
in one transaction per table group, so a crash leaves the previous state, never half of a new one.

The names below load on first use: the exporter's command reaches the engine factory
(`storage.destinations.impl`) through this package, and should not pay for the merges and DuckDB it never runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipelines.storage.db import HistoryLockedError, connect, migrate, reader, schema_version, writer
    from pipelines.storage.destinations import HistoryError, HistoryQueryError, HistoryUnavailableError
    from pipelines.storage.merge import (
        MergeResult,
        merge_account,
        merge_issue_stages,
        merge_projects,
        merge_scan_stages,
        merge_scans,
        record_sync_run,
        stage_format,
    )

__all__ = [
    "HistoryError",
    "HistoryLockedError",
    "HistoryQueryError",
    "HistoryUnavailableError",
    "MergeResult",
    "connect",
    "merge_account",
    "merge_issue_stages",
    "merge_projects",
    "merge_scan_stages",
    "merge_scans",
    "migrate",
    "reader",
    "record_sync_run",
    "schema_version",
    "stage_format",
    "writer",
]
# Where each name above lives.
_HOME_OF = {
    **dict.fromkeys(["HistoryLockedError", "connect", "migrate", "reader", "schema_version", "writer"],
                    "pipelines.storage.db"),
    **dict.fromkeys(["HistoryError", "HistoryQueryError", "HistoryUnavailableError"], "pipelines.storage.destinations"),
    **dict.fromkeys(["MergeResult", "merge_account", "merge_issue_stages", "merge_projects", "merge_scan_stages",
                     "merge_scans", "record_sync_run", "stage_format"], "pipelines.storage.merge"),
}


def __getattr__(name: str) -> Any:
    home = _HOME_OF.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
