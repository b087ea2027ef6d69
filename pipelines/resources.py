"""Dagster resources: the Scanning Service and the DuckDB history.

`ScanningServiceResource` is the one seam through which every asset reaches the service: the live API,
the bundled simulator (just another base URL) or a recorded transport (a subclass overriding
`transport()`) plug in here, never inside an asset. The credential comes from `EnvVar`, so Dagster stores
only the variable's name, and the resource's repr masks it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import duckdb
import httpx
from dagster_duckdb import DuckDBResource

from pipelines import settings
from pipelines.api import ScanningClient, mask_key


class ScanningServiceResource(dg.ConfigurableResource):
    """Security Scanning Service API: base URL ending in /v1 and an rst_ key or rat_ token."""

    base_url: str
    api_key: str
    timeout_seconds: float = 30.0
    concurrency: int = 4
    page_size: int = 100

    def __repr_args__(self):  # pydantic repr: never print the credential
        for name, value in super().__repr_args__():
            yield name, (mask_key(value) if name == "api_key" and isinstance(value, str) else value)

    def transport(self) -> httpx.BaseTransport | None:
        """The HTTP transport; None means real HTTP. Override for recorded or in-memory transports."""
        return None

    @contextmanager
    def client(self) -> Iterator[ScanningClient]:
        base_url, api_key = settings.service(
            {"SCANWATCH_BASE_URL": self.base_url, "SCANWATCH_API_KEY": self.api_key}
        )
        if not (api_key.isascii() and api_key.isprintable()) or any(c.isspace() for c in api_key):
            # httpx would fail deep in header encoding with a message that names nothing to fix.
            raise settings.ConfigError(
                "SCANWATCH_API_KEY holds characters no API key has (spaces, line breaks or non-ASCII): "
                "copy the key (rst_...) again from Settings, API keys"
            )
        client = ScanningClient(
            base_url, api_key, transport=self.transport(), timeout=self.timeout_seconds,
            concurrency=self.concurrency, page_size=self.page_size,
        )
        try:
            yield client
        finally:
            client.close()


class HistoryResource(DuckDBResource):
    """DuckDB history with the schema brought up to date on every connection.

    Unlike the stock resource, the connection is closed even when the asset fails (a leaked read-write
    connection keeps the file locked for every other process), and a lock held by another writer is
    waited for, then reported in one line.
    """

    lock_wait_seconds: float = 120.0

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        from pipelines.storage import connect

        conn = connect(self.database, wait_seconds=self.lock_wait_seconds)
        try:
            yield conn
        finally:
            conn.close()


def default_resources() -> dict[str, object]:
    return {
        "scanning_service": ScanningServiceResource(
            base_url=dg.EnvVar("SCANWATCH_BASE_URL"), api_key=dg.EnvVar("SCANWATCH_API_KEY")
        ),
        "history": HistoryResource(database=str(settings.paths().db)),
    }
