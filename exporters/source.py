"""The snapshot as the exporter sees it: each workspace's part re-read only when it changes, last good copy kept.

A scrape must never fail because a sync is running or crashed half way: the pipeline replaces a part
atomically, and if one is ever unreadable, not a regular file or too large, the exporter keeps serving that
part's last good document, saying so through `secscan_snapshot_readable{workspace} 0`, while the other
workspaces' parts stay fresh. A store that cannot be listed at all (a folder gone, a database down) marks
every part so, and each is read again once it answers. A part the pipeline removed leaves the exporter with it.

A part is also refused when it is not its own: its `workspace_id` (or, before the service's id is known, its
`workspace`) must be its name in the store, every row must carry the part's own `workspace` label, and no two
parts may serve one label (the part that served it first keeps it). Anything else would put another
workspace's series, or the same series twice, on the scrape. And it is refused over the store's `Limits`
(snapshot_format), so that no part, nor all of them together, can take the exporter past its memory limit.
Every refusal is one line through `logging`, once per stored version of the part, naming the part.

A `Shard` serves a share of the parts: with `--shard I/N`, only the parts whose name (the service's workspace
id) hashes to I of N are listed, read and held, so N exporters split the workspaces, each holding and
encoding a Nth of them.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.snapshot.format import TABLES, Limits, SnapshotError, over_cap, parse_snapshot
from pipelines.snapshot.store import WHOLE, FileStore, SnapshotStore

log = logging.getLogger("scanwatch.exporter")


@dataclass(frozen=True)
class Shard:
    """The share of the workspaces one exporter serves: part names whose stable hash is `index` modulo `count`.

    The hash is of the part's name (a BLAKE2b digest, the same in every process and release), not Python's
    `hash()`, which is salted per process. Shard 0 also serves what is served once, whoever's it is: the series
    of no workspace (`Series.once`), and the store's own state when no part can be read at all.
    """

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: I/N needs 0 <= I < N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N` (ValueError, with the reason, on anything else)."""
        index, sep, count = text.partition("/")
        if not sep or not index.strip().isdigit() or not count.strip().isdigit():
            raise ValueError(f"shard {text[:40]!r}: expected I/N, such as 0/4")
        return cls(int(index), int(count))

    @property
    def first(self) -> bool:
        return self.index == 0

    def owns(self, name: str) -> bool:
        if self.count == 1:
            return True
        if name == WHOLE:  # an older scanwatch's single file holds every workspace: served by one exporter
            return self.first
        digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class PartState:
    name: str
    doc: dict[str, Any] | None  # the last document of this part that parsed, possibly older than the stored part
    readable: bool  # whether the stored part parsed
    key: object = None  # identity of the stored part when this state was taken
    size: int = 0  # bytes of `doc` as stored: what it counts against Limits.total_bytes


@dataclass(frozen=True)
class SnapshotState:
    parts: dict[str, PartState] = field(default_factory=dict)
    listed: bool = False  # whether the store itself could be listed
    load_errors: int = 0  # failed loads since the exporter started
    loads: int = 0  # successful (re)loads since the exporter started
    key: object = None  # identity of the whole store when this state was taken (see SnapshotSource.peek)
    stored: int = 0  # parts in the store, every shard's

    @property
    def readable(self) -> bool:
        """The store could be listed and every part in it parsed."""
        return self.listed and bool(self.parts) and all(p.readable for p in self.parts.values())


def _store(where: SnapshotStore | Path | str, limits: Limits | None) -> SnapshotStore:
    if isinstance(where, (str, Path)):
        return FileStore(Path(where), limits=limits or Limits())
    return where


def _not_own(doc: dict[str, Any], name: str, where: str) -> str | None:
    """Why a parsed part is not the part of the workspace it is stored as, or None."""
    if name == WHOLE:  # an older scanwatch's single file holds every workspace
        return None
    label = doc.get("workspace")
    claimed = doc.get("workspace_id") or label
    if claimed != name:
        return (f"snapshot part {where} claims workspace {str(claimed)[:80]!r}, not its own: a part is written by "
                "its workspace's run under its own name; it is not served")
    for table in TABLES:
        for row in doc["tables"].get(table, []):
            if not isinstance(row, dict) or row.get("workspace", label) != label:
                return (f"snapshot part {where} has rows of table {table} labelled with another workspace than its "
                        f"own {str(label)[:80]!r}: it is not served")
    return None


class SnapshotSource:
    """Thread-safe cache of the parsed parts, each keyed by its identity in the store."""

    def __init__(self, store: SnapshotStore | Path | str, limits: Limits | None = None,
                 shard: Shard | None = None) -> None:
        self.store = _store(store, limits)
        self.shard = shard or Shard()
        self.limits = limits or getattr(self.store, "limits", None) or Limits()
        self._lock = threading.Lock()
        self._parts: dict[str, PartState] = {}
        self._listed = False
        self._key: object = None
        self._errors = 0
        self._loads = 0
        self._stored = 0
        self._failed: set[tuple[str | None, object]] = set()  # (part, why): failures counted (and said) once
        self.last_error: str | None = None

    def peek(self) -> object:
        """The store's identity now (a listing, no read): compare with SnapshotState.key to see a change."""
        try:
            return tuple(sorted((n, k) for n, k in self.store.keys().items() if self.shard.owns(n)))
        except SnapshotError as exc:
            return ("unreadable", str(exc))

    def get(self) -> SnapshotState:
        with self._lock:
            self._refresh()
            return SnapshotState(dict(self._parts), self._listed, self._errors, self._loads, self._key, self._stored)

    def _fail(self, key: tuple[str | None, object], message: str) -> None:
        if key not in self._failed:  # count and say each broken or missing part once, not once per scrape
            self._failed = {k for k in self._failed if k[0] != key[0]} | {key}
            self._errors += 1
            log.warning("%s", message)
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
        self._stored = len(keys)
        keys = {n: k for n, k in keys.items() if self.shard.owns(n)}
        self._listed, self._key = True, tuple(sorted(keys.items()))
        self._failed = {k for k in self._failed if k[0] is not None}
        parts: dict[str, PartState] = {}
        # Parts held before keep their labels and their room first, in the order they were loaded.
        held = {n for n, p in self._parts.items() if p.readable}
        for name in sorted(keys, key=lambda n: (n not in held, n)):
            parts[name] = self._load(name, self._parts.get(name), parts)
        self._parts = {name: parts[name] for name in keys}

    def _load(self, name: str, held: PartState | None, taken: dict[str, PartState]) -> PartState:
        """The part's state now; `taken` holds the parts of this listing loaded before it (their labels and
        their bytes come first)."""
        known = held.key if held is not None else None  # a part that failed to parse is read again once it moves
        last_good = held.doc if held is not None else None
        last_size = held.size if held is not None else 0
        try:
            key, raw = self.store.read(name, known)
        except SnapshotError as exc:
            self._fail((name, str(exc)), str(exc))
            return PartState(name, last_good, False, None, last_size)
        if raw is None and held is not None:
            return held
        where = self.store.location(name)
        raw = raw or b""
        size = len(raw)
        try:
            if size > self.limits.part_bytes:
                raise SnapshotError(over_cap(where, size, self.limits.part_bytes))
            used = sum(p.size for p in taken.values())
            if used + size > self.limits.total_bytes:
                key = None  # read again next time: room may be made by then
                raise SnapshotError(f"snapshot part {where} is {size:,} bytes and the parts served already take "
                                    f"{used:,} of the exporter's {self.limits.total_bytes:,}-byte total "
                                    "(--max-total-bytes, SCANWATCH_EXPORTER_MAX_TOTAL_BYTES): it is not served")
            doc = parse_snapshot(raw, where)
            del raw
            refused = _not_own(doc, name, where)
            if refused is None and name != WHOLE:
                label = doc.get("workspace")
                other = next((p.name for p in taken.values()
                              if p.name != WHOLE and p.doc is not None and p.doc.get("workspace") == label), None)
                if other is not None:
                    key = None  # read again next time: once the other part is gone, this one may serve the label
                    refused = (f"snapshot part {where} serves workspace {str(label)[:80]!r}, which part {other!r} "
                               "already serves: it is not served")
            if refused is not None:
                raise SnapshotError(refused)
        except SnapshotError as exc:
            self._fail((name, key), str(exc))
            return PartState(name, last_good, False, key, last_size)
        self._failed = {k for k in self._failed if k[0] != name}
        self.last_error = None
        self._loads += 1
        return PartState(name, doc, True, key, size)
