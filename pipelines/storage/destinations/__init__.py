"""The history's engines, shaped like dlt's destinations: what every engine shares lives here (the `Engine`
hooks and `Connection` in base.py, scanwatch's own errors, the default stage format), each engine lives in
`impl/<name>/` (its factory, SQL client and error mapping, and whatever else it alone needs), and
`impl.engine_for` picks one from the history's location. Nothing outside `impl/` asks which engine answers:
it asks the engine (a hook or a capability).
"""

from __future__ import annotations

from pipelines.storage.destinations.base import Capabilities, Connection, Engine, ReadResult, Statement
from pipelines.storage.destinations.errors import (
    BackupFailed,
    HistoryError,
    HistoryLockedError,
    HistoryQueryError,
    HistoryUnavailableError,
    ReadRefused,
)

__all__ = ["BackupFailed", "Capabilities", "Connection", "Engine", "HistoryError", "HistoryLockedError",
           "HistoryQueryError", "HistoryUnavailableError", "ReadRefused", "ReadResult", "Statement"]
