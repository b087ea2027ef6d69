"""The history (DuckDB or PostgreSQL): schema migrations, staging and set-based merges.

Python only moves pages into a staging table; every comparison, upsert and event is computed by the database
in one transaction per table group, so a crash leaves the previous state, never half of a new one.
"""

from pipelines.storage.db import HistoryLockedError, connect, migrate, reader, schema_version, writer
from pipelines.storage.destinations import HistoryError, HistoryQueryError, HistoryUnavailableError
from pipelines.storage.merge import (
    MergeResult,
    merge_account,
    merge_issue_stages,
    merge_projects,
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
    "merge_scans",
    "migrate",
    "reader",
    "record_sync_run",
    "schema_version",
    "stage_format",
    "writer",
]
