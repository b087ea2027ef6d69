"""Where scanwatch finds the service, its credential and its files.

`scanwatch sync` and `scanwatch exporter` started with the same environment agree on every path
without further settings: the snapshot defaults to a file beside the database.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DB = "data/scanwatch.duckdb"
SNAPSHOT_NAME = "scanwatch-metrics.json"
EXPORTER_PORT = 9817


class ConfigError(RuntimeError):
    """A setting is missing or malformed; the message names the variable to fix."""


@dataclass(frozen=True)
class Paths:
    db: Path
    snapshot: Path


def paths(env: dict[str, str] | None = None) -> Paths:
    env = os.environ if env is None else env
    db = Path(env.get("SCANWATCH_DB") or DEFAULT_DB)
    snapshot = Path(env.get("SCANWATCH_SNAPSHOT") or db.with_name(SNAPSHOT_NAME))
    return Paths(db=db, snapshot=snapshot)


def service(env: dict[str, str] | None = None) -> tuple[str, str]:
    """Base URL and credential, checked for shape before any request is made."""
    env = os.environ if env is None else env
    base_url = (env.get("SCANWATCH_BASE_URL") or "").strip().rstrip("/")
    api_key = (env.get("SCANWATCH_API_KEY") or "").strip()
    if not base_url:
        raise ConfigError("SCANWATCH_BASE_URL is not set: set it to the API address ending in /v1")
    if not base_url.startswith(("http://", "https://")) or not base_url.endswith("/v1"):
        raise ConfigError(
            "SCANWATCH_BASE_URL must be an http(s) address ending in /v1, "
            f"for example https://api.example.com/v1 (got {base_url[:80]!r})"
        )
    if not api_key:
        raise ConfigError("SCANWATCH_API_KEY is not set: create an API key (rst_...) under Settings, API keys")
    if not api_key.startswith(("rst_", "rat_")):
        raise ConfigError("SCANWATCH_API_KEY does not look like an API key (rst_...) or an OAuth token (rat_...)")
    return base_url, api_key
