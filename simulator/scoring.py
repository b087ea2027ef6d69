"""Score and grade from a target's issues. The contract names neither formula nor grade letters."""

from __future__ import annotations

from collections.abc import Iterable

from .model import Issue

# Open and accepted-risk issues weigh on the score; false positives and fixed issues leave it.
WEIGHTS = {"critical": 10.0, "high": 5.0, "medium": 2.0, "low": 0.5, "info": 0.0}
GRADES = ((90, "A"), (80, "B"), (65, "C"), (50, "D"), (35, "E"), (0, "F"))


def score_of(issues: Iterable[Issue]) -> int:
    penalty = sum(WEIGHTS.get(i.severity, 1.0) for i in issues if i.status in ("open", "accepted_risk"))
    return round(100 / (1 + penalty / 80))


def grade_of(score: int | None) -> str | None:
    if score is None:
        return None
    return next(letter for floor, letter in GRADES if score >= floor)
