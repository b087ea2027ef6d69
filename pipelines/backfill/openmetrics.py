"""The reconstructed past as OpenMetrics text, streamed step chunk by step chunk.

Each family is written to its own spool file as chunks arrive, then the spools are joined under one
`# TYPE` line each: promtool wants a family's samples together, and no more than one chunk of samples is
ever held in memory, whatever the length of the history.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

from exporters.families import PROJECT, TARGET, WS
from exporters.text import label_values

# The families /metrics serves that the past can be rebuilt for, with the exporter's own labels.
FAMILIES: dict[str, tuple[str, ...]] = {
    "secscan_project_score": tuple(PROJECT),
    "secscan_target_score": tuple(TARGET),
    "secscan_issues_open": (*PROJECT, "severity"),
    "secscan_quota_limit": (*WS, "quota"),
    "secscan_quota_used": (*WS, "quota"),
    "secscan_quota_remaining": (*WS, "quota"),
}
# Recording rules whose past comes straight from the history, since the counters they read have none. Their
# rules sum every other label away, so they carry no job or instance either.
RULE_FAMILIES: dict[str, tuple[str, ...]] = {
    "secscan:issues_opened:increase1d": (*WS, "severity"),
    "secscan:issues_fixed:increase1d": (*WS, "severity"),
}


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def sample_line(name: str, labels: Mapping[str, str], ts: float, value: float) -> str:
    labels = dict(zip(labels, label_values(list(labels), list(labels.values()))[0], strict=True))  # as /metrics
    body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    number = repr(float(value)) if math.isfinite(value) else ("NaN" if math.isnan(value) else
                                                               ("+Inf" if value > 0 else "-Inf"))
    stamp = f"{ts:.3f}".rstrip("0").rstrip(".")
    return f"{name}{{{body}}} {number} {stamp}\n"


class Spool:
    """Per-family spool files in `folder`, joined into one OpenMetrics document by `finish`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, IO[str]] = {}
        self.types: dict[str, str] = {}
        self.samples = 0

    def write(self, name: str, kind: str, lines: Iterable[str]) -> None:
        fh = self.files.get(name)
        if fh is None:
            fh = self.files[name] = open(self.folder / f"{name.replace(':', '_')}.part", "w", encoding="utf-8")  # noqa: SIM115
            self.types[name] = kind
        for line in lines:
            fh.write(line)
            self.samples += 1

    def finish(self, path: Path) -> Path:
        with open(path, "w", encoding="utf-8") as out:
            for name, fh in self.files.items():
                fh.close()
                out.write(f"# TYPE {name} {self.types[name]}\n")
                with open(fh.name, encoding="utf-8") as part:
                    shutil.copyfileobj(part, out)
                Path(fh.name).unlink()
            out.write("# EOF\n")
        self.files.clear()
        return path

    def close(self) -> None:
        for fh in self.files.values():
            fh.close()
            Path(fh.name).unlink(missing_ok=True)
        self.files.clear()


def spool_rows(spool: Spool, columns: Sequence[str], rows: Iterable[Sequence], extra: Mapping[str, str]) -> None:
    """Rows of `prometheus_series.sql` into the spool, with the scrape's own labels (job, instance) added."""
    index = {c: i for i, c in enumerate(columns)}
    by_family: dict[str, list[str]] = {}
    for row in rows:
        name = row[index["metric"]]
        names = FAMILIES.get(name) or RULE_FAMILIES[name]
        labels = {label: "" if row[index[label]] is None else str(row[index[label]]) for label in names}
        if name in FAMILIES:
            labels.update(extra)
        by_family.setdefault(name, []).append(sample_line(name, labels, float(row[index["ts"]]),
                                                          float(row[index["value"]])))
    for name, lines in by_family.items():
        spool.write(name, "gauge", lines)
