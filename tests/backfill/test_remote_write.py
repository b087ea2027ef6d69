"""Remote write into Debian's Prometheus (2.42) started with the receiver and an out-of-order window, already
scraping live: the past it then answers equals the service's dates day by day for every series, a second run
changes nothing, and a receiver that would drop the past is refused before anything is sent."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from tests.backends import rows
from tests.backfill.prom_server import Prom, assert_answers_as_served, prometheus
from tests.prometheus.tools import free_port

# On the PostgreSQL history: the blocks test the same SQL on DuckDB (test_prometheus.py).
pytestmark = pytest.mark.parametrize("synced", ["postgres"], indirect=True)

SCRAPING = "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: live\n    static_configs:\n" \
           "      - targets: ['127.0.0.1:9']\n"
OUT_OF_ORDER = SCRAPING + "storage:\n  tsdb:\n    out_of_order_time_window: 400d\n"
PAST = '{__name__=~"secscan.*"}'


def remote_write(db: Path | str, url: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "backfill-prometheus", "--db", str(db),
                           "--output", "remote-write", "--url", f"{url}/api/v1/write", *extra],
                          capture_output=True, text=True, timeout=600)


def _live(prom: Prom) -> None:
    """Wait for the receiver's first scrape: its head then holds live data, later than the whole past."""
    deadline = time.monotonic() + 30
    while not prom.get("/api/v1/query", query="up")["result"]:
        assert time.monotonic() < deadline, "no scrape in 30 s"
        time.sleep(0.2)


class Received:
    def __init__(self, prom: Prom, first_day: date, runs: list[subprocess.CompletedProcess],
                 counts: list[int]) -> None:
        self.prom, self.first_day, self.runs, self.counts = prom, first_day, runs, counts


@pytest.fixture(scope="module")
def received(synced, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Received]:
    db, _ = synced
    work = tmp_path_factory.mktemp("rw")
    with prometheus(work, work / "data", "--web.enable-remote-write-receiver", "--storage.tsdb.retention.time=2y",
                    config=OUT_OF_ORDER) as prom:
        _live(prom)
        runs, counts = [], []
        for _ in range(2):
            runs.append(remote_write(db, prom.url))
            assert runs[-1].returncode == 0, runs[-1].stderr
            counts.append(sum(len(v) for v in prom.samples(PAST).values()))
        [(first_day,)] = rows(db, "SELECT first_observed_day FROM first_observations")
        yield Received(prom, first_day, runs, counts)


def test_the_receiver_answers_the_whole_past_as_the_service_dates_say(received, served) -> None:
    assert assert_answers_as_served(received.prom, received.first_day, served, back=400) >= 300


def test_every_sample_lands_once_and_a_second_run_changes_nothing(received) -> None:
    out = received.runs[0].stdout.strip().splitlines()[-1]
    samples, rule_samples = (int(w) for w in out.split(": ", 1)[1].split()[0:4:3])
    assert rule_samples > 0 and received.counts[0] == samples + rule_samples, out
    assert received.counts[1] == received.counts[0]
    assert "Out of order sample" not in received.prom.log.read_text()


def test_one_line_says_what_the_receiver_must_allow(received) -> None:
    first = received.runs[0].stdout.splitlines()[0]
    assert "--web.enable-remote-write-receiver" in first and "out_of_order_time_window" in first, first
    assert "retention" in first


@pytest.mark.parametrize(("flags", "config", "says"), [
    (("--storage.tsdb.retention.time=2y",), OUT_OF_ORDER, "--web.enable-remote-write-receiver"),
    (("--web.enable-remote-write-receiver", "--storage.tsdb.retention.time=2y"), SCRAPING,
     "out_of_order_time_window"),
    (("--web.enable-remote-write-receiver", "--storage.tsdb.retention.time=30d"), OUT_OF_ORDER,
     "--storage.tsdb.retention.time="),
], ids=["no-receiver", "no-out-of-order-window", "short-retention"])
def test_a_receiver_that_would_drop_the_past_is_refused_before_anything_is_sent(
        synced, tmp_path: Path, flags: tuple[str, ...], config: str, says: str) -> None:
    db, _ = synced
    with prometheus(tmp_path, tmp_path / "data", *flags, config=config) as prom:
        _live(prom)
        done = remote_write(db, prom.url)
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
        assert prom.samples(PAST) == {}


def test_a_query_api_that_does_not_answer_the_rules_is_one_line(received, synced) -> None:
    db, _ = synced
    done = remote_write(db, received.prom.url, "--query-url", f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "--query-url" in done.stderr and "Traceback" not in done.stderr


def _write_request_class() -> type:
    """prometheus.WriteRequest as remote write 1.0's types.proto defines it, built by protobuf itself: an
    independent reader of the hand-encoded body."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="scanwatch_test_remote.proto", package="scanwatch_test",
                                               syntax="proto3")
    f = descriptor_pb2.FieldDescriptorProto
    repeated, message = f.LABEL_REPEATED, f.TYPE_MESSAGE
    string, double, int64 = f.TYPE_STRING, f.TYPE_DOUBLE, f.TYPE_INT64
    for name, fields in (("Label", [("name", 1, string, None, None), ("value", 2, string, None, None)]),
                         ("Sample", [("value", 1, double, None, None), ("timestamp", 2, int64, None, None)]),
                         ("TimeSeries", [("labels", 1, message, repeated, ".scanwatch_test.Label"),
                                         ("samples", 2, message, repeated, ".scanwatch_test.Sample")]),
                         ("WriteRequest", [("timeseries", 1, message, repeated, ".scanwatch_test.TimeSeries")])):
        msg = proto.message_type.add(name=name)
        for field, number, kind, label, type_name in fields:
            msg.field.add(name=field, number=number, type=kind, label=label or f.LABEL_OPTIONAL,
                          **({"type_name": type_name} if type_name else {}))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("scanwatch_test.WriteRequest"))


def _snappy_literals(data: bytes) -> bytes:
    """Snappy's block format (format_description.txt), literal elements only: the length, then literals."""
    length, shift, at = 0, 0, 0
    while True:
        byte = data[at]
        at += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    out = bytearray()
    while at < len(data):
        tag = data[at]
        assert tag & 3 == 0, "only literals are written"
        n, at = tag >> 2, at + 1
        if n >= 60:
            extra = n - 59
            n, at = int.from_bytes(data[at:at + extra], "little"), at + extra
        out += data[at:at + n + 1]
        at += n + 1
    assert len(out) == length
    return bytes(out)


def test_a_receiver_that_publishes_no_settings_gets_a_valid_write_request(synced, tmp_path: Path) -> None:
    """Mimir's and Cortex's /api/v1/push publish no Prometheus status: the one line is all that is said, and the
    requests are remote write 1.0 as a stand-in records them."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    posts: list[tuple[dict, bytes]] = []

    class Push(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            posts.append((dict(self.headers), self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200 if self.path == "/api/v1/push" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Push)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    db, _ = synced
    try:
        done = subprocess.run([sys.executable, "-m", "pipelines.cli", "backfill-prometheus", "--db", str(db),
                               "--output", "remote-write", "--no-rules",
                               "--url", f"http://127.0.0.1:{server.server_address[1]}/api/v1/push"],
                              capture_output=True, text=True, timeout=600)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert "out-of-order-time-window" in done.stdout.splitlines()[0]
    request, series = _write_request_class()(), {}
    for headers, body in posts:
        assert headers["Content-Encoding"] == "snappy" and headers["Content-Type"] == "application/x-protobuf"
        assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
        request.ParseFromString(_snappy_literals(body))
        for ts in request.timeseries:
            names = [label.name for label in ts.labels]
            assert names == sorted(names) and names[0] == "__name__"
            stamps = series.setdefault(tuple((label.name, label.value) for label in ts.labels), [])
            stamps += [s.timestamp for s in ts.samples]
    assert len(posts) > 1 and series
    assert all(stamps == sorted(stamps) and len(set(stamps)) == len(stamps) for stamps in series.values())
    reported = int(done.stdout.strip().splitlines()[-1].split(": ", 1)[1].split()[0])
    assert sum(map(len, series.values())) == reported
