"""The snapshot as the exporter sees it: re-read only when the file changes, last good copy kept.

A scrape must never fail because a sync is running or crashed half way: the pipeline replaces the file
atomically, and if it is ever missing or unreadable the exporter keeps serving the last document it
could parse, saying so through `secscan_snapshot_readable 0`.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from pipelines.snapshot import SnapshotError, parse_snapshot


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
        self._key: tuple[int, int, int] | str | None = None
        self._doc: dict | None = None
        self._readable = False
        self._errors = 0
        self._loads = 0
        self.last_error: str | None = None

    def _fail(self, key: tuple[int, int, int] | str, message: str) -> None:
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
            st = os.stat(self.path)
        except OSError:
            return "missing"
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _refresh(self) -> None:
        try:
            # fstat on the open descriptor: the key and the bytes come from the same file even if
            # the pipeline swaps the path between the two calls.
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                key = (st.st_ino, st.st_mtime_ns, st.st_size)
                if key == self._key:
                    return
                raw = fh.read()
        except OSError as exc:
            self._fail("missing", f"cannot read snapshot {self.path}: {exc.strerror or exc}")
            return
        try:
            doc = parse_snapshot(raw, str(self.path))
        except SnapshotError as exc:
            self._fail(key, str(exc))
            return
        self._key, self._doc, self._readable, self.last_error = key, doc, True, None
        self._loads += 1
