"""The one shape every measurement is reported in, so the table, the JSON and the tests agree."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASS, FAIL, INFO, SKIP = "pass", "fail", "info", "skipped"


@dataclass
class Figure:
    """One row of the report: a value, the goal it is judged against and the verdict.

    `key` is stable (tests and scripts look figures up by it); `details` carries the raw counts behind the
    value so that a surprising figure can be explained without re-running.
    """

    key: str
    title: str
    value: float | int | str | None
    unit: str = ""
    goal: str = "reported"
    verdict: str = INFO
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(ok: bool) -> str:
    return PASS if ok else FAIL
