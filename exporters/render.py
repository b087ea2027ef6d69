"""Prometheus text exposition (format 0.0.4) for the snapshot's families, cached per snapshot.

prometheus-client's `generate_latest` validates and escapes every label name of every sample; at the
large world's ~4,600 series that is most of a scrape. Here label names are our own constants, so only
label values are escaped, and the output (byte-identical to `generate_latest` for these families, which a
test checks) is rendered once per snapshot, not once per scrape: the snapshot changes every sync, scrapes
come every few seconds.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TYPE = {"counter": "counter", "gauge": "gauge", "info": "gauge", "histogram": "histogram"}
_SUFFIX = {"counter": "_total", "info": "_info"}


def _escape(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        value = value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def render(families: Iterable[Metric]) -> bytes:
    """Text exposition of gauge, counter, info and histogram families (no timestamps, no exemplars)."""
    out: list[str] = []
    append = out.append
    # Most label sets recur across families (a project x severity cell feeds a dozen metrics): format once.
    label_text: dict[tuple, str] = {}
    for metric in families:
        name = metric.name + _SUFFIX.get(metric.type, "")
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        append(f"# HELP {name} {doc}\n# TYPE {name} {_TYPE[metric.type]}\n")
        for sample in metric.samples:
            if sample.labels:
                key = tuple(sample.labels.items())
                labels = label_text.get(key)
                if labels is None:
                    labels = label_text[key] = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(key))
                append(f"{sample.name}{{{labels}}} {floatToGoString(sample.value)}\n")
            else:
                append(f"{sample.name} {floatToGoString(sample.value)}\n")
    return "".join(out).encode("utf-8")
