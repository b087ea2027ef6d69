"""PostgreSQL's own stage format: COPY's text lines, made while the pages arrive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.storage.destinations.stage_format import StageFormat, as_text

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
