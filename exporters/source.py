"""The snapshot as the exporter sees it: each workspace's part re-read only when it changes, last good copy kept.

A scrape must never fail because a sync is running or crashed half way: the pipeline replaces a part
atomically, and if one is ever unreadable, not a regular file or too large, the exporter keeps serving that
part's last good document, saying so through `secscan_snapshot_readable{workspace} 0`, while the other
workspaces' parts stay fresh. A store that cannot be listed at all (a folder gone, a database down) marks
every part so, and each is read again once it answers. A part the pipeline removed leaves the exporter with it.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from exporters.snapshot_format import SnapshotError, merge_documents, parse_snapshot
from exporters.snapshot_store import FileStore, SnapshotStore


@dataclass(frozen=True)
class PartState:
    name: str
    doc: dict | None  # the last document of this part that parsed, possibly older than the stored part
    readable: bool  # whether the stored part parsed
    key: object = None  # identity of the stored part when this state was taken


@dataclass(frozen=True)
class SnapshotState:
    parts: dict[str, PartState] = field(default_factory=dict)
    listed: bool = False  # whether the store itself could be listed
    load_errors: int = 0  # failed loads since the exporter started
    loads: int = 0  # successful (re)loads since the exporter started
    key: object = None  # identity of the whole store when this state was taken (see SnapshotSource.peek)

    @property
    def readable(self) -> bool:
        """The store could be listed and every part in it parsed."""
        return self.listed and bool(self.parts) and all(p.readable for p in self.parts.values())

    @property
    def doc(self) -> dict | None:
        """Every part served, as one document (for tools and tests; a scrape serves the parts)."""
        docs = [p.doc for p in self.parts.values() if p.doc is not None]
        return merge_documents(docs) if docs else None


def _store(where: SnapshotStore | Path | str) -> SnapshotStore:
    return FileStore(Path(where)) if isinstance(where, (str, Path)) else where


class SnapshotSource:
    """Thread-safe cache of the parsed parts, each keyed by its identity in the store."""

    def __init__(self, store: SnapshotStore | Path | str) -> None:
        self.store = _store(store)
        self._lock = threading.Lock()
        self._parts: dict[str, PartState] = {}
        self._listed = False
        self._key: object = None
        self._errors = 0
        self._loads = 0
        self._failed: set[object] = set()  # failures already counted (and said) once
        self.last_error: str | None = None

    def peek(self) -> object:
        """The store's identity now (a listing, no read): compare with SnapshotState.key to see a change."""
        try:
            return tuple(sorted(self.store.keys().items()))
        except SnapshotError as exc:
            return ("unreadable", str(exc))

    def get(self) -> SnapshotState:
        with self._lock:
            self._refresh()
            return SnapshotState(dict(self._parts), self._listed, self._errors, self._loads, self._key)

    def _fail(self, key: object, message: str) -> None:
        if key not in self._failed:  # count and say each broken or missing part once, not once per scrape
            self._failed = {k for k in self._failed if k[0] != key[0]} | {key}
            self._errors += 1
            print(f"scanwatch exporter: {message}", file=sys.stderr, flush=True)
        self.last_error = message

    def _refresh(self) -> None:
        try:
            keys = self.store.keys()
        except SnapshotError as exc:  # tried again next scrape (a chmod, or the first sync, may fix it)
            self._listed, self._key = False, ("unreadable", str(exc))
            self._fail((None, str(exc)), str(exc))
            # Each part is read again once the store answers: a server back up holds the same parts.
            self._parts = {n: PartState(n, p.doc, False, None) for n, p in self._parts.items()}
            return
        self._listed, self._key = True, tuple(sorted(keys.items()))
        self._failed = {k for k in self._failed if k[0] is not None}
        parts = {}
        for name in keys:
            parts[name] = self._load(name, self._parts.get(name))
        self._parts = parts

    def _load(self, name: str, held: PartState | None) -> PartState:
        known = held.key if held is not None else None  # a part that failed to parse is read again once it moves
        try:
            key, raw = self.store.read(name, known)
        except SnapshotError as exc:
            self._fail((name, str(exc)), str(exc))
            return PartState(name, held.doc if held else None, False, None)
        if raw is None and held is not None:
            return held
        try:
            doc = parse_snapshot(raw or b"", self.store.location(name))
        except SnapshotError as exc:
            self._fail((name, key), str(exc))
            return PartState(name, held.doc if held else None, False, key)
        self._failed = {k for k in self._failed if k[0] != name}
        self.last_error = None
        self._loads += 1
        return PartState(name, doc, True, key)
