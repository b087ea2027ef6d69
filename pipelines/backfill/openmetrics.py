"""The reconstructed past as OpenMetrics text, streamed step chunk by step chunk.

Each family is written to its own spool file as chunks arrive, then the spools are joined under one
`# TYPE` line each: promtool wants a family's samples together, and no more than one chunk of samples is
ever held in memory, whatever the length of the history.
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

from pipelines.snapshot.catalogue import RULE_SERIES, past_series
from pipelines.snapshot.labels import label_values

# The families /metrics serves that the past can be rebuilt for, with the exporter's own labels (the catalogue's).
FAMILIES: dict[str, tuple[str, ...]] = {s.name: s.labels for s in past_series()}
# The family each `source` of prometheus_series.sql's rows is written under.
PAST_SOURCES: dict[str, str] = {s.past: s.name for s in past_series()}
HELP: dict[str, str] = {s.name: s.help for s in past_series()}
_INCREASE = re.compile(r"^\s*sum\s+by\s*\(([^)]*)\)\s*\(\s*increase\(\s*(\w+)\s*\[(\w+)\]\s*\)\s*\)\s*$")
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def duration_seconds(text: str) -> float | None:
    """A Prometheus duration (`400d`, `1y`, `1d12h`, `0s`) in seconds; None when it is not one."""
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * _SECONDS[unit] for n, unit in parts)


@dataclass(frozen=True)
class RulePast:
    """A recording rule whose past comes straight from the history, as its rule defines it: `sum by (labels)
    (increase(counter[window]))`. The rule file is its one home; the backfill reads its window and labels."""

    record: str
    labels: tuple[str, ...]
    window_seconds: int
    source: str  # the column of prometheus_series.sql that counts its counter's events


def recording_rules(files: list[Path]) -> list[tuple[str, str, dict[str, str]]]:
    """(record, expr, labels) of every recording rule in the files; alerting rules are not history."""
    import yaml

    rules = []
    for path in files:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for group in doc.get("groups", []):
            for rule in group.get("rules", []):
                if "record" in rule:
                    rules.append((rule["record"], rule["expr"], dict(rule.get("labels") or {})))
    return rules


def rule_pasts(rules: Iterable[tuple[str, str, dict[str, Any]]] | None = None) -> dict[str, RulePast]:
    """The catalogue's rule series, read from the shipped recording rules (or `rules`: (record, expr, labels))."""
    if rules is None:
        from pipelines.core.package_files import rule_files

        rules = recording_rules(rule_files())
    exprs = {record: expr for record, expr, _ in rules}
    found = {}
    for series in RULE_SERIES:
        match = _INCREASE.match(exprs.get(series.record, ""))
        if match is None or match.group(2) != f"{series.counter}_total":
            raise ValueError(f"recording rule {series.record} is not sum by (...) (increase({series.counter}_total"
                             f"[window])) in the shipped rules: the backfill cannot write its past")
        window = sum(int(n) * _SECONDS[unit] for n, unit in _DURATION.findall(match.group(3)))
        labels = tuple(label.strip() for label in match.group(1).split(",") if label.strip())
        found[series.record] = RulePast(series.record, labels, int(window), series.source)
    if len({p.window_seconds for p in found.values()}) > 1:
        raise ValueError("the recording rules the backfill writes must share one increase() window")
    return found


def __getattr__(name: str) -> object:
    if name == "RULE_FAMILIES":  # the rule series and their labels, as the shipped rules define them
        return {p.record: p.labels for p in rule_pasts().values()}
    raise AttributeError(name)


def series_parameters(workspace_id: str, pasts: Mapping[str, RulePast] | None = None) -> dict[str, object]:
    """The parameters of sql/backfill/prometheus_series.sql for one workspace."""
    pasts = rule_pasts() if pasts is None else pasts
    return {"workspace_id": workspace_id,
            "window_seconds": next(iter(pasts.values())).window_seconds if pasts else 86400}


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def sample_line(name: str, labels: Mapping[str, str], ts: float, value: float) -> str:
    return om_line(rule_sample(name, labels, ts, value))


def rule_sample(name: str, labels: Mapping[str, str], ts: float, value: float) -> Sample:
    """A sample whose labels come from elsewhere (a rule's answer), cleaned and capped as /metrics'."""
    values = label_values(list(labels), list(labels.values()))[0]
    return Sample(name, tuple(zip(labels, values, strict=True)), ts, value)


class Spool:
    """Per-family spool files in `folder`, joined into one OpenMetrics document by `finish`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, IO[str]] = {}
        self.types: dict[str, str] = {}
        self.helps: dict[str, str] = {}
        self.samples = 0

    def write(self, name: str, kind: str, lines: Iterable[str], help_text: str | None = None) -> None:
        fh = self.files.get(name)
        if fh is None:
            fh = self.files[name] = open(self.folder / f"{name.replace(':', '_')}.part", "w", encoding="utf-8")  # noqa: SIM115
            self.types[name] = kind
            if help_text:
                self.helps[name] = help_text
        for line in lines:
            fh.write(line)
            self.samples += 1

    def finish(self, path: Path) -> Path:
        with open(path, "w", encoding="utf-8") as out:
            for name, fh in self.files.items():
                fh.close()
                if name in self.helps:
                    out.write(f"# HELP {name} {escape(self.helps[name])}\n")
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


class Sample(NamedTuple):
    """One sample of the past, its label values already cleaned and capped as /metrics' (every output writes
    the same series)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    ts: float  # seconds
    value: float


def row_samples(columns: Sequence[str], rows: Iterable[Sequence[Any]], extra: Mapping[str, str],
                pasts: Mapping[str, RulePast] | None = None) -> list[Sample]:
    """Rows of `prometheus_series.sql` as samples, with the scrape's own labels (job, instance) added to
    /metrics' series (the catalogue's family for the row's `source`); the rule series' rows carry the rule's
    labels only, since their rule sums every other label away. Row order is kept: the query sorts each
    series by time."""
    pasts = rule_pasts() if pasts is None else pasts
    by_source = {p.source: p for p in pasts.values()}
    index = {c: i for i, c in enumerate(columns)}
    out = []
    for row in rows:
        source = row[index["source"]]
        rule = by_source.get(source)
        name, names = (rule.record, rule.labels) if rule else (PAST_SOURCES[source], FAMILIES[PAST_SOURCES[source]])
        labels = {label: "" if row[index[label]] is None else str(row[index[label]]) for label in names}
        if rule is None:
            labels.update(extra)
        values = label_values(list(labels), list(labels.values()))[0]
        out.append(Sample(name, tuple(zip(labels, values, strict=True)), float(row[index["ts"]]),
                          float(row[index["value"]])))
    return out


def format_value(value: float) -> str:
    return repr(float(value)) if math.isfinite(value) else ("NaN" if math.isnan(value) else
                                                            ("+Inf" if value > 0 else "-Inf"))


def om_line(sample: Sample) -> str:
    """The sample as an OpenMetrics line (seconds)."""
    body = ",".join(f'{k}="{escape(v)}"' for k, v in sample.labels)
    stamp = f"{sample.ts:.3f}".rstrip("0").rstrip(".")
    return f"{sample.name}{{{body}}} {format_value(sample.value)} {stamp}\n"


def spool_samples(spool: Spool, samples: Iterable[Sample]) -> None:
    by_family: dict[str, list[str]] = {}
    for sample in samples:
        by_family.setdefault(sample.name, []).append(om_line(sample))
    for name, lines in by_family.items():
        spool.write(name, "gauge", lines, HELP.get(name))


def spool_rows(spool: Spool, columns: Sequence[str], rows: Iterable[Sequence[Any]], extra: Mapping[str, str],
               pasts: Mapping[str, RulePast] | None = None) -> None:
    """Rows of `prometheus_series.sql` into the spool (see `row_samples`)."""
    spool_samples(spool, row_samples(columns, rows, extra, pasts))
