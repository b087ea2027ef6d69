"""The past sent over HTTP: Prometheus remote write 1.0 (Prometheus's receiver, Mimir, Cortex) and the
VictoriaMetrics import API.

Each series goes in time order, in batches (the history is read a chunk of steps at a time). Before the first
batch the receiver's own settings are read where it publishes them (Prometheus's /api/v1/status/flags,
/status/config and /status/runtimeinfo; VictoriaMetrics's `flag` metrics): a receiver that would drop the past
(no receiver flag, an out-of-order window or a retention shorter than the past) is refused in one line, before
anything is sent. Where the settings cannot be read (Mimir, a proxy), the one line saying what must be allowed
is all there is.

The remote-write body is the protocol's WriteRequest, encoded here (two small messages, no generated code)
and framed as snappy's block format with literals only: valid snappy that every decoder reads, uncompressed,
which costs bandwidth on a one-off transfer but no dependency.
"""

from __future__ import annotations

import math
import re
import struct
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import httpx

from pipelines.backfill.openmetrics import Sample, duration_seconds, escape, format_value
from pipelines.backfill.tsdb import BackfillError, Outcome, Plan

BATCH_SAMPLES = 5000
TIMEOUT = httpx.Timeout(60.0, connect=10.0)
USER_AGENT = "scanwatch-backfill"
_BODY_CAP = 300  # characters of a receiver's error body put in the one line


def _days(seconds: float) -> str:
    return f"{math.ceil(seconds / 86400)}d"


def _first_line(text: str) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= _BODY_CAP else line[: _BODY_CAP - 1] + "…"


# --- remote write 1.0: WriteRequest{timeseries: [TimeSeries{labels: [Label], samples: [Sample]}]} ---------

def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1  # int64 as protobuf's varint: two's complement
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_write_request(series: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]]) -> bytes:
    """A WriteRequest: `series` maps labels (with __name__) to (timestamp ms, value) in time order."""
    body = bytearray()
    for labels, samples in series.items():
        ts = bytearray()
        for name, text in sorted(labels):  # the protocol wants labels sorted by name
            ts += _field(1, _field(1, name.encode()) + _field(2, text.encode()))
        for stamp, value in samples:
            ts += _field(2, b"\x09" + struct.pack("<d", value) + b"\x10" + _varint(stamp))
        body += _field(1, bytes(ts))
    return bytes(body)


def snappy_block(data: bytes) -> bytes:
    """`data` in snappy's block format as literals only (the uncompressed length, then 64 KiB literals)."""
    out = bytearray(_varint(len(data)))
    for at in range(0, len(data), 65536):
        chunk = data[at:at + 65536]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes((60 << 2, n))
        else:
            out += bytes((61 << 2,)) + n.to_bytes(2, "little")
        out += chunk
    return bytes(out)


def _series_key(sample: Sample) -> tuple[tuple[str, str], ...]:
    return (("__name__", sample.name), *sample.labels)


def shown(url: str) -> str:
    """The URL as it may appear in a line: without a user or password."""
    parts = urllib.parse.urlsplit(url)
    return parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")).geturl() \
        if parts.hostname and "@" in parts.netloc else url


class _Batched:
    """Samples held until a batch is full, then sent; a series's samples keep the order they came in."""

    def __init__(self, url: str, query_url: str, client: httpx.Client | None = None) -> None:
        self.target, self.query_target = url, query_url.rstrip("/")
        self.url, self.query_url = shown(url), shown(self.query_target)
        self.client = client or httpx.Client(timeout=TIMEOUT, headers={"User-Agent": USER_AGENT})
        self.pending: list[Sample] = []
        self.sent = 0

    def add(self, samples: list[Sample]) -> list[Sample]:
        self.pending += samples
        while len(self.pending) >= BATCH_SAMPLES:
            batch, self.pending = self.pending[:BATCH_SAMPLES], self.pending[BATCH_SAMPLES:]
            self._send(batch)
        return samples

    def flush(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self._send(batch)

    def _send(self, batch: list[Sample]) -> None:
        try:
            resp = self._post(batch)
        except httpx.HTTPError as exc:
            raise BackfillError(f"{self.url}: {type(exc).__name__} after {self.sent} samples sent; "
                                "run again once it answers (the samples sent are the same again)") from None
        if resp.status_code >= 300:
            raise BackfillError(f"{self.url} answered {resp.status_code} after {self.sent} samples sent: "
                                f"{_first_line(resp.text)}")
        self.sent += len(batch)

    def _post(self, batch: list[Sample]) -> httpx.Response:
        raise NotImplementedError

    def _get_json(self, path: str) -> Any:
        """A Prometheus API answer's `data`, or None when this receiver does not publish it."""
        try:
            resp = self.client.get(f"{self.query_target}{path}")
            if resp.status_code != 200:
                return None
            body = resp.json()
        except (httpx.HTTPError, ValueError):
            return None
        return body.get("data") if isinstance(body, dict) and body.get("status") == "success" else None

    @contextmanager
    def rule_source(self, plan: Plan, outcome: Outcome) -> Iterator[str]:
        """The receiver answers the rules over the raw samples it just took."""
        self.flush()
        yield self.query_target

    def finish(self, outcome: Outcome) -> None:
        self.flush()

    def close(self) -> None:
        self.client.close()


class RemoteWriteSink(_Batched):
    """Prometheus remote write 1.0 into a receiver with an out-of-order window."""

    def requirement(self, oldest: datetime, now: datetime) -> str:
        need = _days((now - oldest).total_seconds())
        return (f"remote write to {self.url}: the receiver must accept remote write (Prometheus: "
                f"--web.enable-remote-write-receiver), take samples {need} old (Prometheus: storage: tsdb: "
                f"out_of_order_time_window: {need} or more; Mimir: -ingester.out-of-order-time-window) and keep "
                f"them (retention of at least {need})")

    def check(self, oldest: datetime, stop: datetime, now: datetime) -> None:
        need = (now - oldest).total_seconds()
        flags = self._get_json("/api/v1/status/flags")
        if not isinstance(flags, dict):
            return  # not a Prometheus (Mimir, Cortex, a proxy): the requirement line is all we can say
        if flags.get("web.enable-remote-write-receiver") != "true" and \
                "remote-write-receiver" not in flags.get("enable-feature", ""):
            raise BackfillError(f"{self.query_url} runs without --web.enable-remote-write-receiver: it would refuse "
                                "every sample; start it with that flag (kube-prometheus-stack: "
                                "prometheus.prometheusSpec.enableRemoteWriteReceiver: true)")
        config = self._get_json("/api/v1/status/config")
        window = 0.0
        if isinstance(config, dict):
            import yaml

            try:
                doc = yaml.safe_load(config.get("yaml", "")) or {}
            except yaml.YAMLError:
                doc = {}
            text = str(((doc.get("storage") or {}).get("tsdb") or {}).get("out_of_order_time_window", "0s"))
            window = duration_seconds(text) or 0.0
        if window < need:
            raise BackfillError(f"{self.query_url} takes samples at most {_days(window) if window else 'no time'} "
                                f"out of order, and the past reaches back {_days(need)}: it would drop them; set "
                                f"storage: tsdb: out_of_order_time_window: {_days(need)} in its configuration "
                                "(kube-prometheus-stack: prometheus.prometheusSpec.tsdb.outOfOrderTimeWindow)")
        runtime = self._get_json("/api/v1/status/runtimeinfo")
        retention = str(runtime.get("storageRetention", "")) if isinstance(runtime, dict) else ""
        kept = [k for k in (duration_seconds(part) for part in retention.split(" or ")) if k]
        if kept and min(kept) < need:
            raise BackfillError(f"{self.query_url} keeps {retention}, and the past reaches back {_days(need)}: it "
                                f"would delete the oldest samples; set --storage.tsdb.retention.time={_days(need)} "
                                "or more")

    def _post(self, batch: list[Sample]) -> httpx.Response:
        series: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]] = {}
        for sample in batch:
            series.setdefault(_series_key(sample), []).append((round(sample.ts * 1000), sample.value))
        return self.client.post(self.target, content=snappy_block(encode_write_request(series)), headers={
            "Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
            "X-Prometheus-Remote-Write-Version": "0.1.0"})


_VM_RETENTION = re.compile(r'^flag\{[^}]*name="retentionPeriod"[^}]*\}', re.MULTILINE)
_VM_VALUE = re.compile(r'value="([^"]*)"')


def vm_retention_seconds(value: str) -> float | None:
    """-retentionPeriod: a bare number is months (31 days each), else a duration (`1y`, `400d`)."""
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value) * 31 * 86400
    return duration_seconds(value)


def vm_line(sample: Sample) -> str:
    """Prometheus's text format with a timestamp in milliseconds, as /api/v1/import/prometheus reads it."""
    body = ",".join(f'{k}="{escape(v)}"' for k, v in sample.labels)
    return f"{sample.name}{{{body}}} {format_value(sample.value)} {round(sample.ts * 1000)}\n"


class VictoriaMetricsSink(_Batched):
    """VictoriaMetrics's /api/v1/import/prometheus (any order), then its rollup cache reset, so queries that
    cached the empty past answer again."""

    def requirement(self, oldest: datetime, now: datetime) -> str:
        need = _days((now - oldest).total_seconds())
        return (f"VictoriaMetrics import to {self.url}: the store must keep {need} (-retentionPeriod={need} or "
                "more); the rollup cache is reset afterwards (/internal/resetRollupResultCache)")

    def check(self, oldest: datetime, stop: datetime, now: datetime) -> None:
        need = (now - oldest).total_seconds()
        try:
            resp = self.client.get(f"{self.query_target}/metrics")
        except httpx.HTTPError:
            return
        match = _VM_RETENTION.search(resp.text) if resp.status_code == 200 else None
        value = _VM_VALUE.search(match.group(0)) if match else None
        kept = vm_retention_seconds(value.group(1)) if value else None
        if value is not None and kept is not None and kept < need:
            raise BackfillError(f"{self.query_url} keeps {value.group(1)} (-retentionPeriod), and the past reaches "
                                f"back {_days(need)}: it would drop the oldest samples; set -retentionPeriod="
                                f"{_days(need)} or more")

    def _post(self, batch: list[Sample]) -> httpx.Response:
        return self.client.post(self.target, content="".join(map(vm_line, batch)).encode(),
                                headers={"Content-Type": "text/plain"})

    def reset_cache(self) -> None:
        try:
            resp = self.client.get(f"{self.query_target}/internal/resetRollupResultCache")
        except httpx.HTTPError as exc:
            raise BackfillError(f"{self.query_url}/internal/resetRollupResultCache: {type(exc).__name__}; the "
                                "samples are in, but queries may answer from the old cache until it expires") \
                from None
        if resp.status_code >= 300:
            raise BackfillError(f"{self.query_url}/internal/resetRollupResultCache answered {resp.status_code}; "
                                "the samples are in, but queries may answer from the old cache until it expires")

    @contextmanager
    def rule_source(self, plan: Plan, outcome: Outcome) -> Iterator[str]:
        self.flush()
        self.reset_cache()
        yield self.query_target

    def finish(self, outcome: Outcome) -> None:
        self.flush()
        self.reset_cache()


WRITE_PATHS = ("/api/v1/write", "/api/v1/push", "/api/v1/import/prometheus")


def query_base(url: str) -> str:
    """The API root beside a write URL: Prometheus's /api/v1/write, VictoriaMetrics's import path. (Mimir's
    /api/v1/push answers queries under /prometheus: pass --query-url.)"""
    for path in WRITE_PATHS:
        if url.rstrip("/").endswith(path):
            return url.rstrip("/")[: -len(path)]
    return url.rstrip("/")
