"""The snapshot's Prometheus families, built by one loop over the metric catalogue. No aggregation happens here.

The snapshot already holds the numbers (DuckDB computed them); `pipelines/snapshot/catalogue.py` says which series
each table's rows give, with which labels and help. Counters come from the history, so they survive exporter
restarts without resets, and their zero cells are present before the first event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from pipelines.snapshot.catalogue import SERIES, Series
from pipelines.snapshot.labels import label_values

KINDS: dict[str, type] = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily, "info": InfoMetricFamily,
                          "histogram": HistogramMetricFamily}


def num(value: Any) -> float | None:
    if value is None or isinstance(value, str):
        return None
    return float(value)


class Families:
    """Collects families by name so each is declared once, whatever order rows arrive in."""

    def __init__(self) -> None:
        self.items: dict[str, Metric] = {}

    def add(self, kind: type, name: str, doc: str, labels: list[str], values: list[str], value: Any,
            **extra: Any) -> None:
        """The one door every label value enters a family by."""
        # A label value that is not a string (a mismatched writer) would only fail later, in the encoder,
        # on every scrape: refuse it here, so the document counts as unreadable and the last good one stays.
        if not all(type(v) is str for v in values) or (kind is InfoMetricFamily and not all(
                type(v) is str for v in value.values())):
            raise TypeError(f"{name}: a label value is not a string")
        values, value = label_values(labels, values, value)  # service text: one line, capped (snapshot/labels.py)
        fam: Any = self.items.get(name)  # one of KINDS, each with an add_metric of its own
        if fam is None:
            fam = self.items[name] = kind(name, doc, labels=labels, **extra)
        if kind is InfoMetricFamily:
            fam.add_metric(values, value)
            return
        if kind is HistogramMetricFamily:
            buckets, total = value
            fam.add_metric(values, buckets, sum_value=total)
            return
        number = num(value)
        if number is not None:
            fam.add_metric(values, number)

    def gauge(self, name: str, doc: str, labels: list[str], values: list[str], value: Any) -> None:
        self.add(GaugeMetricFamily, name, doc, labels, values, value)

    def counter(self, name: str, doc: str, labels: list[str], values: list[str], value: Any) -> None:
        self.add(CounterMetricFamily, name, doc, labels, values, value)


def _label(series: Series, label: str, row: Mapping[str, Any]) -> Any:
    source = series.sources.get(label, label)
    return source(row) if callable(source) else row[source]


def _value(series: Series, row: Mapping[str, Any], bounds: list[str]) -> Any:
    if series.type == "info":
        return None
    if series.type == "histogram":
        counts = (row.get(series.value) if isinstance(series.value, str) else None) or []  # a column's counts
        if len(counts) != len(bounds):
            return None
        buckets = [*zip(bounds, (float(c) for c in counts), strict=True), ("+Inf", float(row.get("count") or 0))]
        return buckets, float(row.get("sum") or 0)
    return series.value(row) if callable(series.value) else row.get(series.value)


def serve(f: Families, series: Series, doc: dict[str, Any], rows: Iterable[Mapping[str, Any]],
          critical_info_limit: int = 0) -> None:
    """Add one catalogue series' samples for `rows` of `doc` to `f` (KeyError/TypeError on a malformed one)."""
    if series.rows is not None:
        rows = series.rows(doc, list(rows), critical_info_limit)
    kind = KINDS[series.type]
    bounds = [floatToGoString(b) for b in doc.get("ttf_buckets", [])]
    for row in rows:
        if series.when is not None and not series.when(row):
            continue
        values = [_label(series, label, row) for label in series.labels]
        if series.type == "info":
            f.add(kind, series.name, series.help, [], [], dict(zip(series.labels, values, strict=True)))
            continue
        value = _value(series, row, bounds)
        if series.type == "histogram" and value is None:
            continue
        f.add(kind, series.name, series.help, list(series.labels), values, value)


def fill(f: Families, doc: dict[str, Any], critical_info_limit: int, *, scope: str = "all") -> None:
    """Add the series of the snapshot document to `f`: `all` of them, those of its `part` only, or those
    `shared` by every part (`Series.once`: a document served with others adds them from one of them only).
    KeyError/TypeError on a malformed document."""
    tables: dict[str, list[dict[str, Any]]] = doc.get("tables", {})
    for series in SERIES:
        if series.table is None or (scope == "part" and series.once) or (scope == "shared" and not series.once):
            continue
        serve(f, series, doc, tables.get(series.table, []), critical_info_limit)
