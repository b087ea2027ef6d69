"""How a record becomes one line of a stage file: the shared default (NDJSON) that every engine loads; an
engine with a faster format of its own defines it in its folder (PostgreSQL's COPY text)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

SEQ = "__scanwatch_seq"  # the order of arrival; a later sighting of an id wins


class StageFormat:
    """NDJSON, with the order of arrival as `SEQ`."""

    suffix = ".ndjson"

    def line(self, record: dict[str, Any], seq: int, data: bytes) -> bytes:
        """`data` is `record` as encode() gave it: compact UTF-8 JSON."""
        body = data[1:]
        return b'{"%s":%d%s%s\n' % (SEQ.encode(), seq, b"," if body != b"}" else b"", body)


NDJSON = StageFormat()


class StagedFile(Protocol):
    """What an engine reads of a stage file (`pipelines/storage/stage.py`'s StageFile)."""

    format: StageFormat
    path: Path

    def lines(self) -> Iterator[bytes]: ...


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
