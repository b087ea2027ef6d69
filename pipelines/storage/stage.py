"""Stage files: API items on disk, written as the pages arrive.

A list is never held whole in memory: each item is appended to its list's file as it comes, with a sequence
number, so that the merge can keep the latest sighting of an id that moved between pages, and a walk that
starts over (the list changed under it) truncates the file, dropping what the abandoned pass gave.

A line is NDJSON, which every engine reads, unless the engine names a format of its own (`StageFormat`):
PostgreSQL's is COPY's text format, so that turning a record into the row it loads as is done while the
pages arrive, when a sync mostly waits on the service, and the merge sends the file as it is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

SEQ = "__scanwatch_seq"  # the order of arrival; a later sighting of an id wins
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


class StageFormat:
    """How a record becomes one line of a stage file: NDJSON, with the order of arrival as `SEQ`."""

    suffix = ".ndjson"

    def line(self, record: dict[str, Any], seq: int, data: bytes) -> bytes:
        """`data` is `record` as encode() gave it: compact UTF-8 JSON."""
        body = data[1:]
        return b'{"%s":%d%s%s\n' % (SEQ.encode(), seq, b"," if body != b"}" else b"", body)


NDJSON = StageFormat()


def as_text(value: object) -> str | None:
    """A JSON value as a stage's text column holds it (what DuckDB's read_json gives a VARCHAR column): a
    string as itself, true and false, a number as written, an object or a list as compact JSON.
    PostgreSQL's text cannot hold U+0000, which a JSON string can: that one character is stored as U+FFFD."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))  # a `json` column keeps `\u0000` escaped


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


class CopyText(StageFormat):
    """PostgreSQL COPY's text format: the entity's columns in order, each as `as_text` gives it (NULL as
    `\\N`), then the order of arrival. Loaded with `COPY ... FROM STDIN` as it is: no work per row at merge
    time, where parsing each line again cost more than the rest of the load."""

    suffix = ".copy"

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CopyText) and other.columns == self.columns

    def __hash__(self) -> int:
        return hash(self.columns)

    def line(self, record: dict[str, Any], seq: int, data: bytes) -> bytes:
        fields = []
        for column in self.columns:
            text = as_text(record.get(column))
            if text is None:
                text = "\\N"
            elif "\\" in text or "\n" in text or "\r" in text or "\t" in text:  # rare: four scans beat translate()
                text = text.translate(_COPY_ESCAPES)
            fields.append(text)
        fields.append(str(seq))
        return ("\t".join(fields) + "\n").encode("utf-8")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def stage_folder(base: Path | None = None) -> Path:
    """This process's own folder of stage files, `scanwatch-stage-<pid>` in the temp folder.

    A sync at the real rate limit reads for long (about 36 minutes for 400k issues), so a file written early
    must never look stale: leftovers are told by their owner's death, not by their age. Folders of processes
    that are gone (a sync killed mid-stage) are removed here.
    """
    base = Path(tempfile.gettempdir()) if base is None else base
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
