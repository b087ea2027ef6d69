"""The snapshot as the exporter sees it: re-read only when the file changes, last good copy kept.

A scrape must never fail because a sync is running or crashed half way: the pipeline replaces the file
atomically, and if it is ever missing, unreadable, not a regular file or too large, the exporter keeps
serving the last document it could parse, saying so through `secscan_snapshot_readable 0`.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from exporters.snapshot_format import SnapshotError, file_key, parse_snapshot, read_snapshot_bytes


@dataclass(frozen=True)
class SnapshotState:
    doc: dict | None  # the last document that parsed, possibly older than the file on disk
    readable: bool  # whether the current file on disk parsed
    load_errors: int  # failed loads since the exporter started
    loads: int  # successful (re)loads since the exporter started
    key: object = None  # identity of the file on disk when this state was taken (see SnapshotSource.peek)


class SnapshotSource:
    """Thread-safe cache of the parsed snapshot keyed by the file's identity (inode, mtime, size)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._key: object = None
        self._doc: dict | None = None
        self._readable = False
        self._errors = 0
        self._loads = 0
        self.last_error: str | None = None

    def _fail(self, key: object, message: str) -> None:
        if key != self._key:  # count each broken or missing file once, not once per scrape
            self._errors += 1
        self._key = key
        self._readable = False
        self.last_error = message

    def get(self) -> SnapshotState:
        with self._lock:
            self._refresh()
            return SnapshotState(self._doc, self._readable, self._errors, self._loads, self._key)

    def peek(self) -> object:
        """The file's identity now (a stat, no read): compare with SnapshotState.key to see a change."""
        try:
            return file_key(os.stat(self.path))
        except OSError:
            return "missing"

    def _refresh(self) -> None:
        try:
            key, raw = read_snapshot_bytes(self.path, self._key)
        except SnapshotError as exc:  # keyed apart from any file key: tried again next scrape (a chmod may fix it)
            self._fail(("unreadable", self.peek()), str(exc))
            return
        if raw is None:
            return
        try:
            doc = parse_snapshot(raw, str(self.path))
        except SnapshotError as exc:
            self._fail(key, str(exc))
            return
        self._key, self._doc, self._readable, self.last_error = key, doc, True, None
        self._loads += 1
