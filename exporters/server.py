"""The HTTP side: a private registry holding the snapshot collector, served by prometheus-client."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.process_collector import ProcessCollector

from exporters.collector import SecscanCollector
from exporters.source import SnapshotSource


def build_registry(snapshot: Path, *, critical_info_limit: int = 0) -> CollectorRegistry:
    """A registry with only scanwatch's series and the exporter's own process metrics (memory, CPU)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SecscanCollector(SnapshotSource(snapshot), critical_info_limit=critical_info_limit))
    ProcessCollector(registry=registry)
    return registry


def serve(snapshot: Path, *, address: str = "0.0.0.0", port: int = 9817, certfile: str | None = None,
          keyfile: str | None = None, critical_info_limit: int = 0):
    """Start serving in a background thread; returns (server, thread) so callers and tests can stop it."""
    registry = build_registry(snapshot, critical_info_limit=critical_info_limit)
    return start_http_server(port, addr=address, registry=registry, certfile=certfile, keyfile=keyfile)
