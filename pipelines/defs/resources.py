"""Dagster resources: the Scanning Service and the history (a DuckDB file or a PostgreSQL database).

`ScanningServiceResource` is the one seam through which every asset reaches the service: the live API,
the bundled simulator (just another base URL) or a recorded transport (a subclass overriding
`transport()`) plug in here, never inside an asset. Credentials come from environment variables read at run
time, so Dagster stores only their names, and the resource's repr masks them. A PostgreSQL history's URL
is a credential too: the history resource then names its variable (`SCANWATCH_DB`), never its value.

Configuration enters Dagster here: the resources read the settings (`pipelines/core/settings.py`) when a run,
a sensor tick or a schedule tick asks, so a workspace added to the file, a changed deadline or SLA is seen at
the next tick without a reload, and assets, sensors and schedules never read the environment themselves.
"""

from __future__ import annotations

import os
from collections import ChainMap
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
import httpx

from pipelines.api import ScanningClient
from pipelines.core.credentials import Workspace, mask_key
from pipelines.core.history_location import HistoryLocation
from pipelines.core.settings import DEFAULT_WORKSPACE, Settings
from pipelines.storage.destinations import Connection
from pipelines.storage.destinations.impl import engine_for


class ScanningServiceResource(dg.ConfigurableResource["ScanningServiceResource"]):
    """Security Scanning Service API of each followed workspace.

    Either `workspaces_file` (keys stay in the variables it names, read at run time) or the one workspace of
    `base_url` and `api_key`. A client is always for one named workspace: its key is never sent elsewhere.
    """

    base_url: str = ""
    api_key: str = ""
    workspaces_file: str = ""
    timeout_seconds: float = 30.0
    concurrency: int = 4
    page_size: int = 100

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:  # pydantic repr: never print the credential
        for name, value in super().__repr_args__():
            yield name, (mask_key(value) if name == "api_key" and isinstance(value, str) else value)

    def transport(self) -> httpx.BaseTransport | None:
        """The HTTP transport; None means real HTTP. Override for recorded or in-memory transports."""
        return None

    def settings(self) -> Settings:
        """The environment under this resource's own config; the file is the config's alone (unset here, the
        environment's is not read). Laid over the environment, not copied: every step asks."""
        given = {"SCANWATCH_BASE_URL": self.base_url, "SCANWATCH_API_KEY": self.api_key}
        return Settings.load(ChainMap({k: v for k, v in given.items() if v},
                                      {"SCANWATCH_WORKSPACES_FILE": self.workspaces_file}, os.environ))

    def workspace(self, name: str | None = None) -> Workspace:
        return self.settings().workspace(name or DEFAULT_WORKSPACE)

    def workspace_names(self) -> list[str]:
        """The followed workspaces as the file lists them now (Dagster's partitions follow it)."""
        return self.settings().workspace_names

    @contextmanager
    def client(self, workspace: str | None = None, *, sync_deadline: float | None = None
               ) -> Iterator[ScanningClient]:
        """``sync_deadline`` (Unix seconds) is when the run must be over; requests and waits stop there."""
        ws = self.workspace(workspace)
        client = ScanningClient(
            ws.base_url, ws.api_key, transport=self.transport(), timeout=self.timeout_seconds,
            concurrency=self.concurrency, page_size=self.page_size, sync_deadline=sync_deadline,
            key_setting=ws.key_variable, url_setting=ws.url_setting,
        )
        try:
            yield client
        finally:
            client.close()


class HistoryResource(dg.ConfigurableResource["HistoryResource"]):
    """The history with the schema brought up to date on every connection: a DuckDB file's path, or a
    PostgreSQL URL given as `dg.EnvVar("SCANWATCH_DB")` so that run storage keeps the variable's name only.

    The connection is closed even when the asset fails (a leaked read-write DuckDB connection keeps the file
    locked for every other process), and a DuckDB lock held by another writer is waited for, then reported in
    one line; a PostgreSQL server that cannot be used is one line too, its URL masked.
    """

    database: str
    lock_wait_seconds: float = 120.0

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:  # pydantic repr: a URL's password never shows
        for name, value in super().__repr_args__():
            yield name, (HistoryLocation(value).masked if name == "database" and isinstance(value, str) else value)

    @property
    def location(self) -> HistoryLocation:
        return HistoryLocation.parse(self.database)

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[HistoryResource]:
        """For the run's life (a sensor's tick's): the steps' writers share a connection where opening one
        costs the engine a server process (`Engine.keeping_writers`), closed when the run ends."""
        with engine_for(self.location).keeping_writers():
            yield self

    def settings(self) -> Settings:
        """The deployment's settings as this history's runs see them (its snapshot's place, the SLA policy)."""
        return Settings.load()

    @contextmanager
    def get_connection(self) -> Iterator[Connection]:
        from pipelines.storage import writer

        with writer(self.location, wait_seconds=self.lock_wait_seconds) as conn:
            yield conn


def default_resources(settings: Settings | None = None) -> dict[str, object]:
    """Dagster stores resource config in its run storage: it gets variable names and the file's path,
    never a key."""
    settings = settings or Settings.load()
    if settings.workspaces_file is not None:
        service = ScanningServiceResource(workspaces_file=str(settings.workspaces_file))
    else:
        service = ScanningServiceResource(base_url=dg.EnvVar("SCANWATCH_BASE_URL"),
                                          api_key=dg.EnvVar("SCANWATCH_API_KEY"))
    # A PostgreSQL URL may carry a password: the resource names the variable, as it does for the API key.
    secret = engine_for(settings.history).capabilities.location_is_secret
    database = dg.EnvVar("SCANWATCH_DB") if secret else str(settings.history.path)
    return {"scanning_service": service, "history": HistoryResource(database=database)}


@dg.definitions
def resources() -> dg.Definitions:
    """The resources every asset, check, sensor and schedule of the code location is given."""
    return dg.Definitions(resources=default_resources())
