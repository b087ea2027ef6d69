"""Exporter under abuse: scrape latency after thousands of dropped half-requests.

`python -m benchmarks.abuse [--quick] [--half N]` starts `scanwatch exporter` as a subprocess on the large
world's snapshot, scrapes it at rest, then opens N connections (3,000 by default) that each send half a
request head and then go silent, as clients that vanish or a slowloris attacker do. While those sockets
stay open, normal scrapes follow one after another; the figure is the worst of them (and whether any
failed). Then the half-requests are dropped (reset) and the scrapes are measured again.

A scrape that does not answer within 60 s counts as 60 s and as failed. Prints a table and writes JSON to
benchmarks/results/.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.scrape import LARGE, NOW, ROOT, _free_port, _percentiles, build_history, print_and_save

HALF_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: exporter\r\nUser-Agent: half"
SCRAPE_TIMEOUT = 60.0


def _scrape(port: int) -> tuple[float, int]:
    """One scrape on a fresh connection: (seconds, status); status 0 when it never answered."""
    import http.client

    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SCRAPE_TIMEOUT)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        resp.read()
        status = resp.status
    except OSError:
        status = 0
    finally:
        conn.close()
    return time.perf_counter() - started, status


def _open_half_requests(port: int, count: int) -> tuple[list[socket.socket], int]:
    """Open `count` connections that send half a request head and stay silent; returns them and refusals."""
    held, refused = [], 0
    for _ in range(count):
        sock = socket.socket()
        sock.settimeout(5)
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(HALF_REQUEST)
        except OSError:
            refused += 1
            sock.close()
            continue
        held.append(sock)
    return held, refused


def _drop(sockets: list[socket.socket]) -> None:
    for sock in sockets:  # a reset, as a peer that vanished would leave behind when it comes back
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


def _closed_by_server(sockets: list[socket.socket]) -> int:
    closed = 0
    for sock in sockets:
        sock.setblocking(False)
        try:
            if sock.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def run(quick: bool = False, half: int = 3000) -> dict:
    """Run the benchmark; `quick` uses fewer scrapes (same world, same number of half-requests)."""
    from tests.helpers import build_snapshot, write_snapshot

    scrapes = 10 if quick else 30
    with tempfile.TemporaryDirectory(prefix="scanwatch-abuse-") as tmp_name:
        tmp = Path(tmp_name)
        conn = build_history(tmp / "history.duckdb", LARGE)
        snap_path = tmp / "metrics.json"
        write_snapshot(build_snapshot(conn, now=NOW), snap_path)
        conn.close()
        port = _free_port()
        env = {**os.environ, "SCANWATCH_SNAPSHOT": str(snap_path)}
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address", "127.0.0.1",
                                 "--port", str(port)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        held: list[socket.socket] = []
        try:
            deadline = time.monotonic() + 30
            while _scrape(port)[1] != 200:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("exporter did not start")
                time.sleep(0.1)
            at_rest = [_scrape(port) for _ in range(scrapes)]
            started = time.perf_counter()
            held, refused = _open_half_requests(port, half)
            open_s = time.perf_counter() - started
            started = time.perf_counter()
            held_scrapes = [_scrape(port) for _ in range(scrapes)]
            held_s = time.perf_counter() - started
            closed = _closed_by_server(held)
            _drop(held)
            held = []
            after_drop = [_scrape(port) for _ in range(scrapes)]
        finally:
            _drop(held)
            proc.terminate()
            proc.wait(timeout=30)

    def figures(results: list[tuple[float, int]]) -> dict:
        out = {k: round(v, 2) for k, v in _percentiles([t for t, _ in results]).items()}
        out["failed"] = sum(1 for _, status in results if status != 200)
        out["statuses"] = sorted({status for _, status in results})
        return out

    result = {
        "benchmark": "abuse",
        "quick": quick,
        "half_requests": half,
        "half_requests_refused_at_connect": refused,
        "open_half_requests_s": round(open_s, 2),
        "scrapes": scrapes,
        "at_rest": figures(at_rest),
        "while_half_requests_held": figures(held_scrapes),
        "while_held_total_s": round(held_s, 2),
        "half_requests_closed_by_exporter": closed,
        "after_drop": figures(after_drop),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    _report(result)
    return result


def _report(result: dict) -> None:
    def line(fig: dict) -> str:
        return f"{fig['median_ms']:.1f} / {fig['max_ms']:.1f} ms, {fig['failed']} failed {fig['statuses']}"

    rows = [
        ("half-requests opened (refused at connect)",
         f"{result['half_requests']:,} ({result['half_requests_refused_at_connect']}) in "
         f"{result['open_half_requests_s']} s"),
        ("scrape at rest: median / worst", line(result["at_rest"])),
        ("scrape while they are held: median / worst", line(result["while_half_requests_held"])),
        ("half-requests the exporter closed", f"{result['half_requests_closed_by_exporter']:,}"),
        ("scrape after they are dropped: median / worst", line(result["after_drop"])),
    ]
    print_and_save(f"scanwatch exporter abuse benchmark (large world, {result['scrapes']} scrapes per phase)", rows,
                   result)

if __name__ == "__main__":
    args = sys.argv[1:]
    count = int(args[args.index("--half") + 1]) if "--half" in args else 3000
    run(quick="--quick" in args, half=count)
