"""Stage files: API items on disk, written as the pages arrive.

A list is never held whole in memory: each item is appended to its list's file as it comes, with a sequence
number, so that the merge can keep the latest sighting of an id that moved between pages, and a walk that
starts over (the list changed under it) truncates the file, dropping what the abandoned pass gave.

A line is NDJSON, which every engine reads, unless the engine names a format of its own (`StageFormat`,
`pipelines/storage/destinations/stage_format.py`): PostgreSQL's is COPY's text format
(`destinations/impl/postgres/stage_format.py`), so that turning a record into the row it loads as is done while the
pages arrive, when a sync mostly waits on the service, and the merge sends the file as it is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pipelines.storage.destinations.stage_format import NDJSON, SEQ, StageFormat, as_text

__all__ = ["NDJSON", "SEQ", "StageFile", "StageFormat", "as_text", "chunks", "encode", "stage_folder"]

FOLDER_PREFIX = "scanwatch-stage-"
MAX_RECORD_BYTES = 4 * 1024 * 1024  # one object of the contract is a few KB; a page of 100 is capped at 64 MiB
QUARANTINED = "(record)"  # the ingest_warnings field of a record left out whole
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str every surrogate is lone (pairs decode to one char)

Problem = tuple[str | None, str, str, str]  # entity id, field, value for ingest_warnings, line for the log


def _without_surrogates(value: object, path: str, found: list[str]) -> object:
    """``value`` with every lone surrogate replaced by U+FFFD; the dotted paths changed go to ``found``."""
    if isinstance(value, str):
        fixed = _SURROGATE.sub("\ufffd", value)
        if fixed != value:
            found.append(path)
        return fixed
    if isinstance(value, dict):
        return {_without_surrogates(k, path, []): _without_surrogates(v, f"{path}.{k}".lstrip("."), found)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def encode(rec: dict[str, Any]) -> tuple[dict[str, Any], bytes | None, list[Problem]]:
    """One record as UTF-8 JSON, or None when it is quarantined (too large), the record as encoded, and what
    was wrong with it.

    One bad record is one warning, never a failed list: a lone surrogate (which no UTF-8 file can hold) is
    stored as U+FFFD, and a record over `MAX_RECORD_BYTES` is left out and listed.
    """
    problems: list[Problem] = []
    entity_id = rec.get("id")
    try:
        data = json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        fields: list[str] = []
        rec = _without_surrogates(rec, "", fields)  # type: ignore[assignment]
        problems += [(entity_id, fld, "lone surrogate replaced by U+FFFD",
                      f"{fld} held an invalid string (a lone surrogate); stored with U+FFFD in its place")
                     for fld in fields]
        data = json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_RECORD_BYTES:
        problems.append((entity_id, QUARANTINED, f"quarantined: over {MAX_RECORD_BYTES // (1024 * 1024)} MiB",
                         f"a record of {len(data) / 1e6:.1f} MB, over the {MAX_RECORD_BYTES // (1024 * 1024)} MiB a "
                         "record may hold, left out and listed in ingest_warnings; the history keeps its earlier "
                         "state"))
        return rec, None, problems
    return rec, data, problems


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


# Temp folders this process swept of dead processes' stage folders (a fork sweeps again: its pid is new). A
# sync of a thousand workspaces writes thousands of stage files, and listing a shared temp folder at each cost
# each file the folder's size.
_SWEPT: set[tuple[Path, int]] = set()


def stage_folder(base: Path | None = None) -> Path:
    """This process's own folder of stage files, `scanwatch-stage-<pid>` in the temp folder.

    A sync at the real rate limit reads for long (about 36 minutes for 400k issues), so a file written early
    must never look stale: leftovers are told by their owner's death, not by their age. Folders of processes
    that are gone (a sync killed mid-stage) are removed here.
    """
    base = Path(tempfile.gettempdir()) if base is None else base
    if (base, os.getpid()) not in _SWEPT:  # once per process: the temp folder is listed whole for the sweep
        _SWEPT.add((base, os.getpid()))
        for folder in base.glob(f"{FOLDER_PREFIX}*"):
            pid = folder.name.removeprefix(FOLDER_PREFIX)
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                shutil.rmtree(folder, ignore_errors=True)
    own = base / f"{FOLDER_PREFIX}{os.getpid()}"
    own.mkdir(mode=0o700, exist_ok=True)
    return own


class StageFile:
    """One list's items, appended one line each in `format`; `discard()` removes the file (always call it)."""

    def __init__(self, name: str, format: StageFormat = NDJSON) -> None:
        fd, path = tempfile.mkstemp(prefix=f"{name}-", suffix=format.suffix, dir=stage_folder())
        self.format = format
        self.path = Path(path)
        self._fh = os.fdopen(fd, "wb")
        self._seq = 0
        self.count = 0
        self.problems: list[Problem] = []  # reported by the merge, which holds the history's connection
        self.quarantined: list[str] = []

    def write(self, item: dict[str, Any]) -> None:
        record, data, problems = encode(item)
        self.problems += problems
        if data is None:
            self.quarantined.append(str(item.get("id")))
            return
        self._seq += 1
        self.count += 1
        self._fh.write(self.format.line(record, self._seq, data))

    def lines(self) -> Iterator[bytes]:
        """The file's lines, once it is closed."""
        with open(self.path, "rb") as fh:
            yield from fh

    def extend(self, items: Iterable[dict[str, Any]]) -> StageFile:
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
