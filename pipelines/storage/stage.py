"""Stage files: API items on disk as NDJSON, written as the pages arrive.

A list is never held whole in memory: each item is appended to its list's file as it comes, with a sequence
number, so that DuckDB can keep the latest sighting of an id that moved between pages, and a walk that
starts over (the list changed under it) truncates the file, dropping what the abandoned pass gave.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pipelines.stale_files import remove_stale

SEQ = "__scanwatch_seq"  # the order of arrival; a later sighting of an id wins
PATTERN = "scanwatch-*-*.ndjson"


class StageFile:
    """One list's items, appended one line each; `discard()` removes the file (always call it)."""

    def __init__(self, name: str) -> None:
        folder = Path(tempfile.gettempdir())
        remove_stale(folder, PATTERN)  # left by a sync killed mid-stage
        fd, path = tempfile.mkstemp(prefix=f"scanwatch-{name}-", suffix=".ndjson", dir=folder)
        self.path = Path(path)
        self._fh = os.fdopen(fd, "w", encoding="utf-8")
        self._seq = 0
        self.count = 0

    def write(self, item: dict) -> None:
        self._seq += 1
        self.count += 1
        body = json.dumps(item, separators=(",", ":"))[1:]
        self._fh.write(f'{{"{SEQ}":{self._seq}{"," if body != "}" else ""}{body}\n')

    def extend(self, items: Iterable[dict]) -> StageFile:
        for item in items:
            self.write(item)
        return self

    def restart(self) -> None:
        """The walk starts over: what it gave so far is dropped."""
        self._fh.seek(0)
        self._fh.truncate()
        self.count = 0
        self.problems.clear()
        self.quarantined.clear()

    def close(self) -> StageFile:
        if not self._fh.closed:
            self._fh.close()
        return self

    @property
    def size(self) -> int:
        if not self._fh.closed:
            self._fh.flush()
        return self.path.stat().st_size

    def discard(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> StageFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def chunks(stages: Iterable[StageFile], max_bytes: int) -> list[list[StageFile]]:
    """Consecutive groups of stage files of at most `max_bytes` each (a bigger file is a group alone), so a
    merge holds a bounded part of a sync at a time whatever the workspace's size."""
    groups: list[list[StageFile]] = []
    size = 0
    for stage in stages:
        if stage.count == 0 and not stage.problems:
            continue
        n = stage.size
        if not groups or size + n > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(stage)
        size += n
    return groups
