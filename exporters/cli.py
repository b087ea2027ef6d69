"""`scanwatch exporter`: serve /metrics from the pipeline's last snapshot.

Kept import-light: prometheus-client and the collector load only when the command runs.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipelines.snapshot.store import SnapshotStore


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from pipelines.core.settings import EXPORTER_PORT, Settings

    settings = Settings.load()
    parser.add_argument("--listen-address", default=settings.exporter_address,
                        help="address to bind (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=settings.exporter_port,
                        help=f"port to serve /metrics on (default {EXPORTER_PORT})")
    parser.add_argument("--snapshot", type=Path, default=None,
                        help="metrics snapshot folder to serve (default: SCANWATCH_SNAPSHOT; else a PostgreSQL "
                             "SCANWATCH_DB's own snapshot_parts table, or the folder beside a DuckDB SCANWATCH_DB)")
    parser.add_argument("--tls-cert", default=None, help="PEM certificate: serve /metrics over HTTPS")
    parser.add_argument("--tls-key", default=None, help="PEM private key for --tls-cert")
    parser.add_argument("--max-part-bytes", type=int, default=settings.exporter_max_part_bytes, metavar="BYTES",
                        help="refuse (serve as unreadable) a workspace's snapshot part over this size (default "
                             f"{settings.exporter_max_part_bytes:,}: SCANWATCH_EXPORTER_MAX_PART_BYTES)")
    parser.add_argument("--max-total-bytes", type=int, default=settings.exporter_max_total_bytes, metavar="BYTES",
                        help="refuse a part that would take all parts served together over this size (default "
                             f"{settings.exporter_max_total_bytes:,}: SCANWATCH_EXPORTER_MAX_TOTAL_BYTES)")
    parser.add_argument("--critical-issue-info", type=int, default=settings.exporter_critical_info, metavar="N",
                        help="opt in to secscan_critical_issue_info for up to N open critical issues (default 0: off)")
    parser.add_argument("--shard", default=settings.exporter_shard, metavar="I/N",
                        help="serve only the workspaces whose stable hash falls in shard I of N, so N exporters "
                             "split them; shard 0 also serves the series of no workspace (default 0/1: all; "
                             "SCANWATCH_EXPORTER_SHARD)")


def _url(scheme: str, bound: tuple[Any, ...]) -> str:
    host, port = bound[0], bound[1]
    if host in ("0.0.0.0", "::"):  # every interface: name one a local browser can open
        host = "localhost"
    return f"{scheme}://[{host}]:{port}/metrics" if ":" in host else f"{scheme}://{host}:{port}/metrics"


def run(args: argparse.Namespace) -> int:
    import logging

    # One line per event on standard error, whatever the process's root logger already has (basicConfig would
    # do nothing where a host or a test configured logging first, and the refusal lines would be lost).
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("scanwatch exporter: %(message)s"))
    log = logging.getLogger("scanwatch.exporter")
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    from exporters.source import Shard

    try:
        shard = Shard.parse(args.shard)
    except ValueError as exc:
        log.error("--shard (SCANWATCH_EXPORTER_SHARD): %s", exc)
        return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        log.error("--tls-cert and --tls-key go together")
        return 2
    if args.max_part_bytes < 1 or args.max_total_bytes < args.max_part_bytes:
        log.error("--max-part-bytes must be at least 1 and --max-total-bytes at least as large")
        return 2
    from pipelines.core.settings import ConfigError, Settings
    from pipelines.snapshot.format import Limits

    limits = Limits(args.max_part_bytes, args.max_total_bytes)
    settings = Settings.load()
    snapshot: Path | SnapshotStore = args.snapshot or settings.paths.snapshot
    shown = str(snapshot)
    if args.snapshot is None and settings.snapshot_in_history:
        try:
            history = settings.history
        except ConfigError as exc:
            log.error("%s", exc)
            return 2
        from pipelines.storage.destinations.impl import engine_for

        snapshot = engine_for(history).polled_snapshot(history, limits)  # read-only, a connection of its own
        shown = f"{history.masked} (snapshot_parts)"
    from exporters.server import serve

    try:
        server, _thread = serve(snapshot, address=args.listen_address, port=args.port, certfile=args.tls_cert,
                                keyfile=args.tls_key, critical_info_limit=max(0, args.critical_issue_info),
                                limits=limits, shard=shard)
    except OSError as exc:  # ssl.SSLError is one too: a certificate or key that does not load
        log.error("cannot listen on %s:%s: %s", args.listen_address, args.port, exc.strerror or exc)
        return 1
    bound = server.server_address
    url = _url("https" if args.tls_cert else "http", bound)
    share = f", shard {shard} of the workspaces" if shard.count > 1 else ""
    # The address on standard output, as a command's result (scripts and the demo read it there); events on
    # standard error, through logging.
    print(f"scanwatch exporter: serving {url} (bound to {bound[0]} port {bound[1]}) from {shown}{share}",
          flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    return 0
