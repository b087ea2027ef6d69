"""The exporter over real HTTP: the library's negotiation, gzip, filters and methods; abuse; odd snapshot paths."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from exporters.server import serve
from pipelines.snapshot import format as snapshot_format
from pipelines.snapshot.format import MAX_SNAPSHOT_BYTES, SnapshotError, encode_snapshot, read_snapshot
from tests.helpers import write_snapshot

ROOT = Path(__file__).resolve().parents[2]
OPENMETRICS = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75," \
              "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"  # what Prometheus 2.42 sends


@pytest.fixture
def snap_path(snapshot, tmp_path) -> Path:
    path = tmp_path / "metrics.json"
    write_snapshot(snapshot, path)
    return path


class Exporter:
    def __init__(self, path: Path, **options) -> None:
        self.server, _ = serve(path, address="127.0.0.1", port=0, **options)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.http = httpx.Client(base_url=self.url, timeout=20)

    def get(self, path: str = "/metrics", **kwargs) -> httpx.Response:
        return self.http.get(path, **kwargs)

    def readable(self) -> float:
        text = self.get().text
        return float(re.search(r"^secscan_snapshot_readable (\S+)$", text, re.MULTILINE).group(1))

    def close(self) -> None:
        self.http.close()
        self.server.shutdown()


@pytest.fixture
def exporter(snap_path):
    running = Exporter(snap_path)
    yield running
    running.close()


def names(text: str, parse=text_string_to_metric_families) -> list[str]:
    return [f.name for f in parse(text)]


def wait_for(check, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return result


# -- the library's protocol ---------------------------------------------------------------------------------


def test_openmetrics_is_negotiated_and_ends_with_one_eof(exporter):
    plain = exporter.get(headers={"Accept-Encoding": "identity"})
    assert plain.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    om = exporter.get(headers={"Accept": OPENMETRICS, "Accept-Encoding": "identity"})
    assert om.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    assert om.text.endswith("# EOF\n") and om.text.count("# EOF") == 1
    families = names(om.text, openmetrics_families)  # the strict parser: a family split in two would fail
    assert len(families) == len(set(families))
    assert {"secscan_project_score", "secscan_issues_opened", "secscan_snapshot_readable",
            "process_resident_memory_bytes"} <= set(families)
    assert len(families) == len(names(plain.text))


def test_gzip_is_one_member_with_the_same_families(exporter):
    raw = exporter.http.get("/metrics", headers={"Accept": OPENMETRICS, "Accept-Encoding": "gzip"})
    assert raw.headers["content-encoding"] == "gzip"
    with httpx.stream("GET", exporter.url + "/metrics", headers={"Accept": OPENMETRICS,
                                                                 "Accept-Encoding": "gzip"}) as resp:
        compressed = b"".join(resp.iter_raw())
    one = zlib.decompressobj(31)
    text = one.decompress(compressed).decode()
    assert one.eof and one.unused_data == b""  # a single member: every gzip reader sees the whole body
    assert text == gzip.decompress(compressed).decode()
    assert text.endswith("# EOF\n") and names(text, openmetrics_families) == names(raw.text, openmetrics_families)


def test_name_filter_is_the_librarys(exporter):
    resp = exporter.get("/metrics?name[]=secscan_project_score&name[]=secscan_snapshot_readable")
    assert resp.status_code == 200
    assert sorted(names(resp.text)) == ["secscan_project_score", "secscan_snapshot_readable"]
    assert 'secscan_project_score{project="Shop",project_id="p1",team="unowned",workspace="Acme"} 72.0' in resp.text


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "HEAD"])
def test_methods_other_than_get_are_405(exporter, method):
    resp = exporter.http.request(method, "/metrics")
    assert resp.status_code == 405 and resp.headers["allow"] == "OPTIONS,GET"
    assert exporter.http.options("/metrics").headers["allow"] == "OPTIONS,GET"


def test_paths(exporter):
    assert exporter.get("/-/healthy").text == "ok\n"
    assert exporter.get("/nope").status_code == 404
    assert "secscan_project_score" in exporter.get("/").text


# -- abuse ----------------------------------------------------------------------------------------------------


HALF_REQUESTS = 3000


@pytest.fixture
def descriptors() -> Iterator[int]:
    """Room for the half-requests: both ends of each connection live in this process, and `ulimit -n` is
    often 1024. The soft limit is raised as far as the hard one allows for the test (and put back); the
    count is what then fits, and must still be thousands."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * HALF_REQUESTS + 512
    ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
    try:
        room = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        count = HALF_REQUESTS if room == resource.RLIM_INFINITY else min(HALF_REQUESTS, (room - 512) // 2)
        assert count >= 1000, f"only {room} file descriptors allowed (hard limit {hard}): raise `ulimit -Hn`"
        yield count
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_thousands_of_dropped_half_requests_do_not_keep_a_scrape_out(exporter, descriptors):
    held, refused = [], 0
    try:
        for _ in range(descriptors):
            sock = socket.socket()
            sock.settimeout(10)
            try:
                sock.connect(("127.0.0.1", exporter.server.server_port))
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: half")
            except OSError:
                refused += 1
                sock.close()
                continue
            held.append(sock)
        assert refused == 0
        resp = exporter.get()  # while every half-request is still open on the client's side
        assert resp.status_code == 200 and "secscan_snapshot_readable 1.0" in resp.text
        assert exporter.get("/-/healthy").status_code == 200
        closed = 0
        for sock in held:  # the exporter dropped all but its last few connections to keep room
            sock.setblocking(False)
            try:
                closed += sock.recv(1) == b""
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        assert closed >= len(held) - 64
    finally:
        for sock in held:
            sock.close()
    assert exporter.get().status_code == 200


def test_a_silent_half_request_is_dropped_at_the_exchange_deadline(snap_path):
    running = Exporter(snap_path, exchange_seconds=3.0)
    try:
        with socket.create_connection(("127.0.0.1", running.server.server_port), timeout=30) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            assert sock.recv(1) == b""  # closed by the exporter, not by our 30 s timeout
        assert running.get().status_code == 200  # encoded once: the next answer is well within the deadline
        with socket.create_connection(("127.0.0.1", running.server.server_port), timeout=30) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head = sock.recv(64)
            assert head.startswith(b"HTTP/1.1 200")
    finally:
        running.close()


def test_an_oversized_request_head_is_refused(exporter):
    with socket.create_connection(("127.0.0.1", exporter.server.server_port), timeout=30) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ")
        with contextlib.suppress(OSError):  # the exporter answers and closes before the head is over
            for _ in range(64):  # a head that keeps growing, a kilobyte at a time
                sock.sendall(b"a" * 1024)
                time.sleep(0.005)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 400")
    assert exporter.get().status_code == 200


# -- the snapshot path ------------------------------------------------------------------------------------------


def test_a_fifo_never_wedges_reloads(snap_path, snapshot):
    running = Exporter(snap_path)
    try:
        assert running.readable() == 1
        snap_path.unlink()
        os.mkfifo(snap_path)  # no writer will ever open it: a blocking open would hang for good
        wait_for(lambda: running.readable() == 0, "secscan_snapshot_readable 0 on a FIFO")
        assert 'secscan_project_score{project="Shop"' in running.get().text  # the last good copy
        assert running.get("/metrics?name[]=secscan_snapshot_readable").status_code == 200
        snap_path.unlink()
        write_snapshot(snapshot, snap_path)
        wait_for(lambda: running.readable() == 1, "reloads to resume")
    finally:
        running.close()


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_special_file_reads_as_unreadable_at_once(tmp_path, special):
    path = Path(special)
    if special == "fifo":
        path = tmp_path / "metrics.json"
        os.mkfifo(path)
    with pytest.raises(SnapshotError, match="not a regular file"):
        read_snapshot(path)
    running = Exporter(path)
    try:
        assert running.readable() == 0
        assert "secscan_project_score" not in running.get().text
    finally:
        running.close()


def test_an_oversized_snapshot_is_refused_without_reading_it(snap_path, snapshot):
    running = Exporter(snap_path)
    try:
        assert running.readable() == 1
        big = snap_path.with_name("big.json")
        with open(big, "wb") as fh:  # sparse: the size is what counts, reading it would cost the memory
            fh.truncate(MAX_SNAPSHOT_BYTES + 1)
        with pytest.raises(SnapshotError, match="cap"):
            read_snapshot(big)
        os.replace(big, snap_path)
        wait_for(lambda: running.readable() == 0, "secscan_snapshot_readable 0 on an oversized file")
        assert 'secscan_project_score{project="Shop"' in running.get().text
    finally:
        running.close()


def test_the_writer_refuses_a_snapshot_over_the_cap(snapshot, monkeypatch):
    assert json.loads(encode_snapshot(snapshot)) == snapshot
    monkeypatch.setattr(snapshot_format, "MAX_SNAPSHOT_BYTES", 1000)
    with pytest.raises(SnapshotError, match="cap"):
        encode_snapshot(snapshot)


# -- the command ------------------------------------------------------------------------------------------------


def test_start_line_names_the_port_actually_bound(snap_path):
    env = {**os.environ, "SCANWATCH_SNAPSHOT": str(snap_path)}
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address", "127.0.0.1",
                             "--port", "0"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = [None]
        reader = threading.Thread(target=lambda: line.__setitem__(0, proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        found = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line[0] or "")
        assert found and found.group(1) != "0", line[0]
        assert httpx.get(found.group(0), timeout=20).status_code == 200
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out == "" and err == "", (out, err)  # one line per event: the start line only


def test_a_port_in_use_is_one_line(snap_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address", "127.0.0.1",
                                 "--port", str(port), "--snapshot", str(snap_path)], cwd=ROOT, capture_output=True,
                                text=True, timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in result.stderr


def test_an_answer_slower_than_a_scrape_is_given_is_said_once(snap_path, caplog):
    from exporters.app import make_app
    from exporters.cache import EncodedSnapshot
    from exporters.collector import SecscanCollector
    from exporters.source import SnapshotSource

    encoded = EncodedSnapshot(SecscanCollector(SnapshotSource(snap_path)))
    encoded.refresh()  # what the watch thread does first
    app = make_app(encoded, slow_seconds=-1.0)  # every answer is "slow"
    answered = []
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""}
    for _ in range(3):
        body = b"".join(app(environ, lambda status, headers, exc_info=None: answered.append(status)))
        assert b"secscan_project_score" in body
    assert answered == ["200 OK"] * 3
    said = [r.getMessage() for r in caplog.records if "/metrics answer took" in r.getMessage()]
    assert len(said) == 1 and "--shard" in said[0]  # once while it stays slow, with what to do


# -- the encoded snapshot: plain scrapes answered from bytes encoded once per snapshot change -------------------

VARIANTS = [({"Accept-Encoding": "identity"}, text_string_to_metric_families),
            ({"Accept-Encoding": "gzip"}, text_string_to_metric_families),
            ({"Accept": OPENMETRICS, "Accept-Encoding": "identity"}, openmetrics_families),
            ({"Accept": OPENMETRICS, "Accept-Encoding": "gzip"}, openmetrics_families)]


def _score(text: str, parse) -> float:
    return next(s.value for f in parse(text) for s in f.samples
                if s.name == "secscan_project_score" and s.labels.get("project_id") == "p1")


def test_a_new_snapshot_is_served_in_every_format_once_it_lands(exporter, snap_path, snapshot):
    for headers, parse in VARIANTS:
        assert _score(exporter.get(headers=headers).text, parse) == 72
    changed = json.loads(json.dumps(snapshot))
    changed["tables"]["projects"][0]["score"] = 55
    write_snapshot(changed, snap_path)
    for headers, parse in VARIANTS:  # each format's bytes were encoded again, none kept from the old snapshot
        wait_for(lambda h=headers, p=parse: _score(exporter.get(headers=h).text, p) == 55, f"55 served to {headers}")
    filtered = exporter.get("/metrics?name[]=secscan_project_score")
    assert names(filtered.text) == ["secscan_project_score"]
    assert _score(filtered.text, text_string_to_metric_families) == 55


def _moving(name: str) -> bool:
    return name.startswith("process_") or name == "secscan_snapshot_age_seconds"


def _families(text: str, parse) -> dict:
    return {f.name: (f.type, f.documentation, sorted(map(repr, f.samples))) for f in parse(text)
            if not _moving(f.name)}


@pytest.fixture
def encoded_families(monkeypatch) -> list[set[str]]:
    """The names of the families each call of the library's two encoders encoded, in call order."""
    import prometheus_client.exposition as text_format
    import prometheus_client.openmetrics.exposition as openmetrics

    calls: list[set[str]] = []
    for module in (text_format, openmetrics):
        def recorded(registry, *args, _encode=module.generate_latest, **kwargs):
            calls.append({f.name for f in registry.collect()})
            return _encode(registry, *args, **kwargs)

        monkeypatch.setattr(module, "generate_latest", recorded)
    return calls


def test_plain_scrapes_serve_the_encoded_snapshot_and_filters_collect_now(snap_path, encoded_families):
    from prometheus_client import generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

    from tests.helpers import build_registry

    running = Exporter(snap_path)
    try:
        wait_for(lambda: running.get("/-/ready").status_code == 200, "ready")
        expected = {parse: encode(build_registry(snap_path)).decode() for encode, parse in
                    ((generate_latest, text_string_to_metric_families), (openmetrics_latest, openmetrics_families))}
        scraped = len(encoded_families)
        for headers, parse in VARIANTS:
            resp = running.get(headers=headers)
            assert _families(resp.text, parse) == _families(expected[parse], parse)  # what the library encodes
            assert {"process_resident_memory_bytes", "secscan_snapshot_age_seconds"} <= set(names(resp.text, parse))
            if parse is openmetrics_families:
                assert resp.text.endswith("# EOF\n") and resp.text.count("# EOF") == 1
        per_scrape = encoded_families[scraped:]
        assert per_scrape and not any("secscan_project_score" in f for f in per_scrape)  # no snapshot re-encoded
        assert any("process_resident_memory_bytes" in f for f in per_scrape)  # the self-series are encoded per scrape
        filtered = running.get("/metrics?name[]=secscan_snapshot_age_seconds", headers={"Accept": OPENMETRICS})
        assert names(filtered.text, openmetrics_families) == ["secscan_snapshot_age_seconds"]
        assert encoded_families[-1] == {"secscan_snapshot_age_seconds"}  # the library's app encoded it, now
    finally:
        running.close()


def test_the_self_series_move_between_scrapes_of_one_encoded_snapshot(exporter):
    def age(headers: dict, parse) -> float:
        return next(s.value for f in parse(exporter.get(headers=headers).text) for s in f.samples
                    if s.name == "secscan_snapshot_age_seconds")

    for headers, parse in VARIANTS:
        first = age(headers, parse)
        time.sleep(1.1)
        assert age(headers, parse) >= first + 1  # computed per scrape, not frozen in the cached bytes


def test_ready_and_a_plain_scrape_wait_for_the_first_encoding(snap_path, encoded_families, monkeypatch):
    import prometheus_client.openmetrics.exposition as openmetrics

    release = threading.Event()
    encode = openmetrics.generate_latest

    def held(registry, *args, **kwargs):
        if "secscan_project_score" in {f.name for f in registry.collect()}:
            release.wait(30)  # the snapshot's first encoding, held
        return encode(registry, *args, **kwargs)

    monkeypatch.setattr(openmetrics, "generate_latest", held)
    running = Exporter(snap_path)
    try:
        wait_for(lambda: running.get("/metrics?name[]=secscan_snapshot_readable").text.endswith(
            "secscan_snapshot_readable 1.0\n"), "the part loaded")
        time.sleep(0.5)
        assert running.get("/-/ready").status_code == 503  # loaded, not encoded yet
        answers: list[httpx.Response] = []
        waiting = threading.Thread(target=lambda: answers.append(running.get(headers={"Accept": OPENMETRICS})))
        waiting.start()
        time.sleep(0.5)
        assert not answers  # waits for the first encoding rather than encode the snapshot itself
        release.set()
        waiting.join(20)
        assert answers[0].status_code == 200 and _score(answers[0].text, openmetrics_families) == 72
        assert running.get("/-/ready").status_code == 200
    finally:
        release.set()
        running.close()
