"""The table printed at the end of a run and the JSON written beside it: the same figures, two shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.figures import Figure

RESULTS = Path(__file__).resolve().parent / "results"


def _value(f: Figure) -> str:
    if f.value is None:
        return "n/a"
    if isinstance(f.value, float):
        text = f"{f.value:.3f}".rstrip("0").rstrip(".") if abs(f.value) < 10 else f"{f.value:.1f}"
    else:
        text = str(f.value)
    return f"{text} {f.unit}".strip()


def table(figures: list[Figure]) -> str:
    rows = [("figure", "value", "goal", "verdict")] + [(f.title, _value(f), f.goal, f.verdict) for f in figures]
    widths = [min(70, max(len(r[i]) for r in rows)) for i in range(4)]
    lines = []
    for n, row in enumerate(rows):
        lines.append(" | ".join(cell[:w].ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(figures: list[Figure]) -> str:
    """The table of docs/benchmarks.md: one line per figure."""
    out = ["| figure | value | goal | verdict |", "| --- | --- | --- | --- |"]
    out += [f"| {f.title} | {_value(f)} | {f.goal} | {f.verdict} |" for f in figures]
    return "\n".join(out)


def write(name: str, figures: list[Figure], meta: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    body = {**meta, "figures": {f.key: f.as_dict() for f in figures}}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(body, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
